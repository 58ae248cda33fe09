import type { JobEvents } from '../events/job-events.js';
import type { JobEventType, LocalJobEvent } from '../interfaces/job-event.interface.js';
import type { Job } from '../interfaces/job.interface.js';
import type { JobTracer } from '../tracing/job-tracer.js';

type EventDetail = Partial<Pick<LocalJobEvent, 'error' | 'failureKind' | 'retryDelayMs' | 'deadLettered' | 'durationMs' | 'result' | 'progress'>>;

/** What one worker says about its jobs: to the job's trace span, and to the app's job events when anyone listens. */
export class WorkerEvents {
  constructor(
    private readonly events: JobEvents,
    private readonly workerId: string,
    private readonly tracer?: JobTracer,
  ) {
    // Its outcomes come back on the fleet's channel too: heard there, they would be emitted twice.
    events.addOwnWorker(workerId);
  }

  emit(type: JobEventType, job: Job, extra?: EventDetail): void {
    this.tracer?.observe(type, job, extra ?? {});
    if (this.events.observed) {
      this.events.emit({
        origin: 'local',
        type,
        jobId: job.id,
        queue: job.queue,
        task: job.task,
        attempt: job.attempt,
        job,
        workerId: this.workerId,
        ...extra,
      });
    }
  }
}
