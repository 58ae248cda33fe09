import type { Schedule } from '../interfaces/schedule.interface.js';
import type { ScheduleRule } from './schedule-rule.js';

/** A stampeded_schedules row as the public Schedule. */
export function toSchedule(row: Record<string, any>): Schedule {
  return {
    key: row.key,
    queue: row.queue,
    task: row.task,
    args: row.args,
    tenantId: row.tenant_id,
    orderingKey: row.ordering_key ?? null,
    priority: row.priority,
    cron: row.cron_expr,
    intervalSeconds: row.interval_secs === null ? null : Number(row.interval_secs),
    timezone: row.timezone,
    dstPolicy: row.dst_policy,
    missedPolicy: row.missed_policy,
    paused: row.paused,
    nextRunAt: row.next_run_at,
    lastRunAt: row.last_run_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function ruleOf(row: Record<string, any>): ScheduleRule {
  return {
    key: row.key,
    cron: row.cron_expr,
    intervalSecs: row.interval_secs === null ? null : Number(row.interval_secs),
    timezone: row.timezone,
    dstPolicy: row.dst_policy,
    missedPolicy: row.missed_policy,
  };
}
