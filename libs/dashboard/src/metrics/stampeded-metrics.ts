import type { Registry } from 'prom-client';
import type { Subscription } from 'rxjs';
import type { JobEvents, LocalJobEvent } from '@stampeded/nestjs';
import type { ReadDatabase } from '@stampeded/nestjs/internal';
import { METRIC_BREAKERS, METRIC_COUNTS, METRIC_VERDICTS } from '../sql/metrics.sql.js';

type PromClient = typeof import('prom-client');

const VERDICTS = ['steady', 'rush', 'hold'] as const;
const BREAKER_STATES = ['closed', 'open', 'half_open'] as const;
/** undefined_table: an install older than the migration that adds the table. */
const UNDEFINED_TABLE = '42P01';

/** The reads of one instance the gauges are made of, and its name for the `stampeded_instance` label. */
export interface MetricsSource {
  instance: string;
  db: Pick<ReadDatabase, 'query'> & Partial<Pick<ReadDatabase, 'status' | 'replicated'>>;
}

/**
 * The label every series carries: the instance (forRoot's `name`, `default`
 * for the default one). Not `instance`, which Prometheus sets on every series
 * to the scraped target's address, and would rename ours to `exported_instance`.
 */
export const INSTANCE_LABEL = 'stampeded_instance';

/**
 * Each source's rows, the label of its instance on each; a source whose
 * database does not answer is left out, so that one database down does not
 * fail the scrape of the others (the health indicator reports it down).
 */
async function eachSource<Row>(sources: () => MetricsSource[], read: (db: MetricsSource['db']) => Promise<Row[]>): Promise<[string, Row][]> {
  const answers = await Promise.allSettled(sources().map(async ({ instance, db }) => (await read(db)).map((row): [string, Row] => [instance, row])));
  return answers.flatMap((answer) => (answer.status === 'fulfilled' ? answer.value : []));
}

/**
 * Stampeded's Prometheus metrics in one registry: gauges read from the
 * database at scrape time (jobs per queue and state, verdicts, pauses), counters and
 * histograms fed by this process's job events (outcomes, failures by kind,
 * durations, queue wait).
 *
 * The gauges are the whole install's, whichever process is scraped; the
 * counters and histograms are this process's own, as Prometheus expects of a
 * counter, and sum across the fleet in a query.
 */
export class StampededMetrics {
  private readonly subscriptions: Subscription[] = [];
  /**
   * When each running attempt started, by job and attempt: the runtime's
   * 'completed' event carries a duration and 'failed' does not, so a failed
   * attempt is timed from its own 'active' event. Bounded by the jobs this
   * process is running.
   */
  private readonly started = new Map<string, number>();
  private readonly outcomes;
  private readonly failures;
  private readonly duration;
  private readonly wait;

  constructor(
    client: PromClient,
    readonly registry: Registry,
    db: MetricsSource['db'] | (() => MetricsSource[]),
    prefix: string,
  ) {
    const registers = [registry];
    // The app's instances are read at each scrape: a named instance's module may be built after this one.
    const sources = typeof db === 'function' ? db : () => [{ instance: 'default', db }];
    this.replicaGauges(client, registers, prefix, sources);
    new client.Gauge({
      name: `${prefix}jobs`,
      help: 'Jobs per queue and state, from the trigger-maintained counters.',
      labelNames: [INSTANCE_LABEL, 'queue', 'state'],
      registers,
      async collect() {
        const rows = await eachSource(sources, (db) => db.query<{ queue: string; state: string; n: number }>(METRIC_COUNTS));
        this.reset();
        for (const [instance, row] of rows) this.set({ [INSTANCE_LABEL]: instance, queue: row.queue, state: row.state }, Number(row.n));
      },
    });
    new client.Gauge({
      name: `${prefix}queue_verdict`,
      help: "1 for each queue's current verdict (steady, rush, hold), 0 for the others.",
      labelNames: [INSTANCE_LABEL, 'queue', 'verdict'],
      registers,
      async collect() {
        const rows = await eachSource(sources, (db) => db.query<{ queue: string; verdict: string }>(METRIC_VERDICTS));
        this.reset();
        for (const [instance, row] of rows) {
          for (const verdict of VERDICTS) this.set({ [INSTANCE_LABEL]: instance, queue: row.queue, verdict }, row.verdict === verdict ? 1 : 0);
        }
      },
    });
    new client.Gauge({
      name: `${prefix}queue_paused`,
      help: '1 while an operator has paused the queue, 0 otherwise.',
      labelNames: [INSTANCE_LABEL, 'queue'],
      registers,
      async collect() {
        const rows = await eachSource(sources, (db) => db.query<{ queue: string; paused: boolean }>(METRIC_VERDICTS));
        this.reset();
        for (const [instance, row] of rows) this.set({ [INSTANCE_LABEL]: instance, queue: row.queue }, row.paused ? 1 : 0);
      },
    });
    new client.Gauge({
      name: `${prefix}breaker_state`,
      help: "1 for each destination's circuit-breaker state (closed, open, half_open), 0 for the others.",
      labelNames: [INSTANCE_LABEL, 'destination', 'state'],
      registers,
      async collect() {
        const rows = await eachSource(sources, (db) =>
          db.query<{ destination: string; state: string }>(METRIC_BREAKERS).catch((err: { code?: string }) => {
            if (err.code === UNDEFINED_TABLE) return [];
            throw err;
          }),
        );
        this.reset();
        for (const [instance, row] of rows) {
          for (const state of BREAKER_STATES) this.set({ [INSTANCE_LABEL]: instance, destination: row.destination, state }, row.state === state ? 1 : 0);
        }
      },
    });
    this.outcomes = new client.Counter({
      name: `${prefix}job_outcomes_total`,
      help: 'Job outcomes recorded by this process: completed, retrying, discarded, cancelled, lost.',
      labelNames: [INSTANCE_LABEL, 'queue', 'task', 'outcome'],
      registers,
    });
    this.failures = new client.Counter({
      name: `${prefix}job_failures_total`,
      help: 'Failed attempts recorded by this process, by failure kind.',
      labelNames: [INSTANCE_LABEL, 'queue', 'task', 'kind'],
      registers,
    });
    this.duration = new client.Histogram({
      name: `${prefix}job_duration_seconds`,
      help: 'How long handlers ran, completed or failed.',
      labelNames: [INSTANCE_LABEL, 'queue', 'task'],
      buckets: [0.005, 0.025, 0.1, 0.25, 1, 2.5, 10, 30, 120, 600],
      registers,
    });
    this.wait = new client.Histogram({
      name: `${prefix}job_queue_wait_seconds`,
      help: 'From when a job was due to when a worker claimed it.',
      labelNames: [INSTANCE_LABEL, 'queue', 'task'],
      buckets: [0.01, 0.05, 0.25, 1, 5, 15, 60, 300, 1800],
      registers,
    });
  }

  /** How far behind the replica the gauges read is, and whether they read it at all. */
  private replicaGauges(client: PromClient, registers: Registry[], prefix: string, sources: () => MetricsSource[]): void {
    const statuses = () =>
      Promise.all(
        sources()
          .filter(({ db }) => db.replicated && db.status)
          .map(async ({ instance, db }) => [instance, await db.status!()] as const),
      );
    new client.Gauge({
      name: `${prefix}replica_lag_seconds`,
      help: 'How far the replica (readConnection) is behind the primary: 0 when it has replayed all it received; NaN while unknown or down.',
      labelNames: [INSTANCE_LABEL],
      registers,
      async collect() {
        for (const [instance, status] of await statuses()) this.set({ [INSTANCE_LABEL]: instance }, status?.lagSeconds ?? NaN);
      },
    });
    new client.Gauge({
      name: `${prefix}replica_up`,
      help: "1 while the dashboard's and these gauges' reads go to the replica, 0 while they fall back to the primary.",
      labelNames: [INSTANCE_LABEL],
      registers,
      async collect() {
        for (const [instance, status] of await statuses()) this.set({ [INSTANCE_LABEL]: instance }, status?.readingFrom === 'replica' ? 1 : 0);
      },
    });
  }

  /**
   * Starts counting this process's job events: those of the jobs its own
   * workers run, so that a fleet's metrics add up across its processes.
   */
  observe(events: Pick<JobEvents, 'local$'>, instance = 'default'): void {
    this.subscriptions.push(events.local$.subscribe((event) => this.record(event, instance)));
  }

  stop(): void {
    for (const subscription of this.subscriptions.splice(0)) subscription.unsubscribe();
  }

  private observeDuration(attempt: string, labels: Record<string, string>, durationMs: number | undefined): void {
    const started = this.started.get(attempt);
    this.started.delete(attempt);
    const ms = durationMs ?? (started === undefined ? undefined : Date.now() - started);
    if (ms !== undefined) this.duration.observe(labels, ms / 1000);
  }

  private record(event: LocalJobEvent, instance: string): void {
    const labels = { [INSTANCE_LABEL]: instance, queue: event.queue, task: event.task };
    const attempt = `${instance}:${event.jobId}:${event.attempt}`;
    switch (event.type) {
      case 'active': {
        this.started.set(attempt, Date.now());
        const due = new Date(event.job.scheduledAt).getTime();
        const claimed = event.job.claimedAt ? new Date(event.job.claimedAt).getTime() : Date.now();
        this.wait.observe(labels, Math.max(0, claimed - due) / 1000);
        break;
      }
      case 'failed':
        this.failures.inc({ ...labels, kind: event.failureKind ?? 'raised' });
        this.observeDuration(attempt, labels, event.durationMs);
        break;
      case 'completed':
        this.observeDuration(attempt, labels, event.durationMs);
        this.outcomes.inc({ ...labels, outcome: event.type });
        break;
      case 'retrying':
      case 'discarded':
        this.outcomes.inc({ ...labels, outcome: event.type });
        break;
      case 'cancelled':
      case 'lost':
      case 'released':
        this.started.delete(attempt);
        if (event.type !== 'released') this.outcomes.inc({ ...labels, outcome: event.type });
        break;
    }
  }
}
