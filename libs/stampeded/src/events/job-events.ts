import { Injectable } from '@nestjs/common';
import { Subject, filter, type Observable, type Subscription } from 'rxjs';
import type { JobEvent, JobEventType } from '../interfaces/job-event.interface.js';

/** The job events this process sees, as one stream. One per app: no static state. */
@Injectable()
export class JobEvents {
  private readonly subject = new Subject<JobEvent>();
  private readonly subscriptions: Subscription[] = [];
  readonly events$: Observable<JobEvent> = this.subject.asObservable();

  /** Whether anyone listens: an event nobody hears is not worth making. */
  get observed(): boolean {
    return this.subject.observed;
  }

  emit(event: JobEvent): void {
    this.subject.next(event);
  }

  /** Only events of these types (and task or queue, when given). */
  of(types: JobEventType[], where: { task?: string; queue?: string } = {}): Observable<JobEvent> {
    return this.events$.pipe(
      filter(
        (e) => types.includes(e.type) && (where.task === undefined || e.job.task === where.task) && (where.queue === undefined || e.job.queue === where.queue),
      ),
    );
  }

  subscribe(where: { types: JobEventType[]; task?: string; queue?: string }, listener: (event: JobEvent) => unknown): void {
    this.subscriptions.push(this.of(where.types, where).subscribe((event) => void listener(event)));
  }

  /** At the very end of shutdown, after the drain's own events went out. */
  complete(): void {
    for (const s of this.subscriptions) s.unsubscribe();
    this.subject.complete();
  }
}
