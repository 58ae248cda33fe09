import { SET_SCHEDULE_PAUSED, TRIGGER_SCHEDULE } from '@stampeded/nestjs/internal';
import { SCHEDULES } from '../sql/schedules.sql.js';
import type { InspectorDatabase } from './inspector-database.js';

/** The schedules, and an operator's pause, resume and trigger of one: the core's statements, as SchedulesService runs them. */
export class ScheduleInspector {
  constructor(private readonly db: InspectorDatabase) {}

  schedules(): Promise<Record<string, unknown>[]> {
    return this.db.query(SCHEDULES);
  }

  /** True when the schedule exists. */
  async setSchedulePaused(key: string, paused: boolean): Promise<boolean> {
    return (await this.db.query(SET_SCHEDULE_PAUSED, [key, paused])).length > 0;
  }

  /**
   * Enqueues a schedule's job once, now, leaving its regular runs as they
   * were, as SchedulesService.trigger() does. Null when there is no such
   * schedule.
   */
  async triggerSchedule(key: string): Promise<{ id: string; queue: string } | null> {
    const [row] = await this.db.query<{ job_id: string; queue: string }>(TRIGGER_SCHEDULE, [key]);
    return row ? { id: row.job_id, queue: row.queue } : null;
  }
}
