import type { JobEvents } from '../events/job-events.js';
import type { JobEvent, JobEventType } from '../interfaces/job-event.interface.js';
import type { Job } from '../interfaces/job.interface.js';
import type { JobTracer } from '../tracing/job-tracer.js';

/** What one worker says about its jobs: to the job's trace span, and to the app's job events when anyone listens. */
export class WorkerEvents {
  constructor(
    private readonly events: JobEvents,
    private readonly workerId: string,
    private readonly tracer?: JobTracer,
  ) {}

  emit(type: JobEventType, job: Job, extra?: Partial<JobEvent>): void {
    this.tracer?.observe(type, job, extra ?? {});
    if (this.events.observed) this.events.emit({ type, job, workerId: this.workerId, ...extra });
  }
}
