import { INSIGHTS_HISTOGRAM, INSIGHTS_PRECISION, INSIGHTS_TOP_KEYS, addHistogram, percentile } from '@stampeded/nestjs/internal';
import { BAD_INSIGHTS_RANGE } from '../dashboard.messages.js';
import { INSIGHTS_KEYS, INSIGHTS_NAMES, INSIGHTS_POINTS, INSIGHTS_WATERMARK } from '../sql/insights.sql.js';
import type { InspectorDatabase } from './inspector-database.js';
import { InspectorInputError } from './inspector-input.js';

/**
 * The ranges a chart shows, and the rollup rows each reads: the last hour a
 * point a minute, the last day and week a point an hour.
 */
export const INSIGHTS_RANGES = {
  hour: { grain: 'minute', points: 60, stepSecs: 60 },
  day: { grain: 'hour', points: 24, stepSecs: 3600 },
  week: { grain: 'hour', points: 168, stepSecs: 3600 },
} as const;
export type InsightsRange = keyof typeof INSIGHTS_RANGES;

export interface Percentiles {
  p50: number | null;
  p95: number | null;
  p99: number | null;
}

export interface OutcomeCounts {
  /** Jobs that completed. */
  completed: number;
  /** Failed attempts (not queue control's deferrals), whether or not the job ran again. */
  failed: number;
  /** Failed attempts after which the job was due again. */
  retried: number;
  /** Jobs that failed for good. */
  discarded: number;
  cancelled: number;
}

export interface InsightsPoint extends OutcomeCounts {
  /** The start of the minute or hour, epoch seconds. */
  at: number;
  /** Claim minus due time of the jobs that completed in it, in ms. */
  wait: Percentiles;
  /** Finish minus claim of the jobs that completed in it, in ms. */
  run: Percentiles;
}

export interface BusyKey {
  key: string;
  jobs: number;
  discarded: number;
}

export interface Insights {
  range: InsightsRange;
  grain: 'minute' | 'hour';
  /** null: every queue; likewise task. */
  queue: string | null;
  task: string | null;
  /** Every point of the range, oldest first, zero where nothing finished. */
  points: InsightsPoint[];
  /** The whole range's counts and percentiles. */
  totals: OutcomeCounts & { wait: Percentiles; run: Percentiles };
  tenants: BusyKey[];
  destinations: BusyKey[];
  /** Every job finished by then is in the figures; null before the rollup's first run. */
  through: Date | null;
  /** How far a percentile may be from the exact one, as a fraction (0.19: within 19%). */
  precision: number;
  /** The queues and tasks with rows in the last day, for the filters. */
  names: { queue: string; task: string }[];
}

const ZERO = (): OutcomeCounts => ({ completed: 0, failed: 0, retried: 0, discarded: 0, cancelled: 0 });
const OUTCOMES = ['completed', 'failed', 'retried', 'discarded', 'cancelled'] as const;

export function insightsRange(value: unknown): InsightsRange {
  if (value === undefined || value === null || value === '') return 'hour';
  if (typeof value === 'string' && Object.hasOwn(INSIGHTS_RANGES, value)) return value as InsightsRange;
  throw new InspectorInputError(BAD_INSIGHTS_RANGE(value, Object.keys(INSIGHTS_RANGES)));
}

const percentiles = (hist: readonly number[]): Percentiles => ({ p50: percentile(hist, 0.5), p95: percentile(hist, 0.95), p99: percentile(hist, 0.99) });

/** Outcomes and latencies over time, from the rollup the maintenance leader keeps: a chart reads a row a point. */
export class InsightsInspector {
  constructor(private readonly db: InspectorDatabase) {}

  async insights(options: { queue?: string; task?: string; range?: string } = {}): Promise<Insights> {
    const range = insightsRange(options.range);
    const { grain, points: count, stepSecs } = INSIGHTS_RANGES[range];
    const queue = options.queue || null;
    const task = options.task || null;
    const span = (count - 1) * stepSecs;
    const [rows, keys, [mark], names] = await Promise.all([
      this.db.query<Record<string, any>>(INSIGHTS_POINTS, [grain, queue ?? '', task ?? '', span]),
      // A task's keys are kept across its queues, not per queue and task.
      this.db.query<{ dimension: string; key: string; jobs: string; discarded: string }>(INSIGHTS_KEYS, [
        task ? '' : (queue ?? ''),
        task ?? '',
        count * stepSecs,
        INSIGHTS_TOP_KEYS,
      ]),
      this.db.query<{ through: Date | null }>(INSIGHTS_WATERMARK),
      this.db.query<{ queue: string; task: string }>(INSIGHTS_NAMES),
    ]);
    const empty = () => new Array<number>(INSIGHTS_HISTOGRAM.buckets).fill(0);
    const totalWait = empty();
    const totalRun = empty();
    const totals = ZERO();
    const byAt = new Map<number, InsightsPoint>();
    for (const row of rows) {
      const at = Number(row.at);
      const point: InsightsPoint = { at, ...ZERO(), wait: percentiles(row.wait_ms), run: percentiles(row.run_ms) };
      for (const o of OUTCOMES) {
        point[o] = Number(row[o]);
        totals[o] += point[o];
      }
      addHistogram(totalWait, row.wait_ms);
      addHistogram(totalRun, row.run_ms);
      byAt.set(at, point);
    }
    // The last point is the database's current minute or hour; ours may differ a little.
    const last = rows.length ? Math.max(...byAt.keys(), floorTo(Date.now() / 1000, stepSecs)) : floorTo(Date.now() / 1000, stepSecs);
    const points: InsightsPoint[] = [];
    const none: Percentiles = { p50: null, p95: null, p99: null };
    for (let i = count - 1; i >= 0; i--) {
      const at = last - i * stepSecs;
      points.push(byAt.get(at) ?? { at, ...ZERO(), wait: none, run: none });
    }
    const busy = (dimension: string) =>
      keys.filter((k) => k.dimension === dimension).map((k) => ({ key: k.key, jobs: Number(k.jobs), discarded: Number(k.discarded) }));
    return {
      range,
      grain,
      queue,
      task,
      points,
      totals: { ...totals, wait: percentiles(totalWait), run: percentiles(totalRun) },
      tenants: busy('tenant'),
      destinations: busy('destination'),
      through: mark?.through ?? null,
      precision: INSIGHTS_PRECISION,
      names,
    };
  }
}

function floorTo(secs: number, step: number): number {
  return Math.floor(secs / step) * step;
}
