import { SetMetadata } from '@nestjs/common';
import { ON_JOB_EVENT_METADATA } from '../stampeded.constants.js';
import type { JobEventType } from '../interfaces/job-event.interface.js';

export interface OnJobEventFilter {
  /** Only events of jobs of this task. */
  task?: string;
  /** Only events of jobs of this queue. */
  queue?: string;
  /** Events of this instance (forRoot's `name`). Default: the default instance. */
  instance?: string;
}

/**
 * Calls the decorated method with each job event of the given type(s) that
 * this process sees. A method that throws is logged, never fails the job.
 *
 * @example
 * @OnJobEvent('discarded', { queue: 'payments' })
 * alert(event: JobEvent) {}
 */
export const OnJobEvent = (type: JobEventType | JobEventType[], filter: OnJobEventFilter = {}): MethodDecorator =>
  SetMetadata(ON_JOB_EVENT_METADATA, { types: Array.isArray(type) ? type : [type], ...filter });
