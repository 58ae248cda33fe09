import { Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import pg from 'pg';
import { migrate, QueueService, StampededModule, writableHostClient } from '@stampeded/nestjs';
import { startPrimary, startStandby, type StartedPrimary, type Standby } from '../support/standby.js';
import { waitFor } from '../support/test-app.js';
import { WorkerProcess, type WorkerEvent } from '../support/worker-process.js';

// A fleet of worker processes and a steady stream of enqueues; the primary is
// SIGKILLed, the standby promoted, and every connection finds the new primary
// through writableHostClient(), as docs/reliability.md tells an app to
// connect. `npm test` runs a short load; `npm run test:failover` a longer one.
const FULL = process.env.STAMPEDED_FAILOVER === 'full';
const PROCESSES = FULL ? 4 : 3;
const BEFORE_MS = FULL ? 10_000 : 1500;
const AFTER_MS = FULL ? 10_000 : 1500;
/** Enqueues per second. */
const RATE = FULL ? 80 : 40;
/** Every LONG_EVERY-th job runs LONG_MS: long enough to be running when the primary dies. */
const LONG_EVERY = 8;
const LONG_MS = 1200;
/** Async: how long the primary commits alone before it dies. */
const UNREPLICATED_MS = 1500;
/** Async: jobs enqueued (and replicated) before streaming stops, due just after: claimed on the primary alone, and running when it dies. */
const HELD = 6;
const HELD_DUE_MS = 500;
const HELD_MS = 5000;
/** Async: jobs started before streaming stops that finish after: their completions are lost. */
const FINISHING = 4;
const FINISHING_MS = 1200;

interface Acked {
  id: string;
  at: number;
}

interface Run {
  id: string;
  pid: number;
  attempt: number;
  start: number;
  end?: number;
  /** The worker stopped it (its signal fired) before it finished. */
  aborted?: boolean;
}

/** The app a user runs beside the workers: it enqueues, connected as the README shows. */
async function bootEnqueuer(url: string, hosts: string[]): Promise<INestApplicationContext> {
  @Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url, extra: { Client: writableHostClient(hosts) }, poolErrorHandler: () => {} }),
      StampededModule.forRoot({ worker: { enabled: false }, maintenance: { enabled: false } }),
    ],
  })
  class EnqueuerModule {}
  return NestFactory.createApplicationContext(EnqueuerModule, { logger: ['error'], abortOnError: false });
}

/** Enqueues at RATE until stopped; keeps the id and time of every enqueue() that returned. */
class Stream {
  readonly acked: Acked[] = [];
  failed = 0;
  private stopped = false;
  readonly done: Promise<void>;

  constructor(private readonly queue: QueueService) {
    this.done = this.run();
  }

  private async run(): Promise<void> {
    const everyMs = 1000 / RATE;
    const started = Date.now();
    for (let n = 0; !this.stopped; n++) {
      const ms = n % LONG_EVERY === 0 ? LONG_MS : Math.floor(Math.random() * 30);
      try {
        const { id } = await this.queue.enqueue('witnessed', { ms }, { queue: 'failover' });
        this.acked.push({ id, at: Date.now() });
      } catch {
        // An enqueue that threw may or may not have committed: not counted as acknowledged.
        this.failed++;
      }
      await new Promise((r) => setTimeout(r, Math.max(0, started + (n + 1) * everyMs - Date.now())));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
  }
}

function runsOf(fleet: WorkerProcess[]): Run[] {
  const runs = new Map<string, Run>();
  for (const p of fleet) {
    for (const e of p.events) {
      if (e.event !== 'run') continue;
      const key = `${p.pid}/${String(e.id)}/${String(e.attempt)}`;
      if (e.phase === 'start') runs.set(key, { id: String(e.id), pid: p.pid, attempt: Number(e.attempt), start: Number(e.at) });
      else if (runs.has(key)) Object.assign(runs.get(key)!, { end: Number(e.at), aborted: e.aborted === true });
    }
  }
  return [...runs.values()];
}

/** Pairs of runs of one job that overlapped in time; a run with no end still runs. */
function overlaps(runs: Run[]): [Run, Run][] {
  const byJob = new Map<string, Run[]>();
  for (const r of runs) byJob.set(r.id, [...(byJob.get(r.id) ?? []), r]);
  const pairs: [Run, Run][] = [];
  for (const list of byJob.values()) {
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length; j++) {
        const [a, b] = [list[i], list[j]];
        if (a.start < (b.end ?? Infinity) && b.start < (a.end ?? Infinity)) pairs.push([a, b]);
      }
    }
  }
  return pairs;
}

/** Whether two processes ever led at once, from their elected/deposed times; and who leads at the end. */
function leadership(fleet: WorkerProcess[]): { overlapping: number; leadersAtEnd: number } {
  const terms: { pid: number; from: number; to: number }[] = [];
  let leadersAtEnd = 0;
  for (const p of fleet) {
    let from: number | undefined;
    for (const e of p.events.filter((x: WorkerEvent) => x.event === 'elected' || x.event === 'deposed' || x.event === 'closed')) {
      if (e.event === 'elected') from = Number(e.at);
      else if (from !== undefined) {
        terms.push({ pid: p.pid, from, to: Number(e.at ?? Date.now()) });
        from = undefined;
      }
    }
    if (from !== undefined) {
      terms.push({ pid: p.pid, from, to: Infinity });
      leadersAtEnd++;
    }
  }
  let overlapping = 0;
  for (let i = 0; i < terms.length; i++) {
    for (let j = i + 1; j < terms.length; j++) {
      if (terms[i].pid !== terms[j].pid && terms[i].from < terms[j].to && terms[j].from < terms[i].to) overlapping++;
    }
  }
  return { overlapping, leadersAtEnd };
}

interface Outcome {
  acked: Acked[];
  failedEnqueues: number;
  runs: Run[];
  fleet: WorkerProcess[];
  /** Async: the jobs claimed on the old primary alone and running when it died. */
  held: string[];
  pausedAt: number;
  /** When the standby had stopped streaming: what the old primary committed after is lost. */
  pauseDoneAt: number;
  killedAt: number;
  /** When the old primary's postmaster had exited: nothing is committed there after. */
  deadAt: number;
  promotedAt: number;
  /** From the kill to the first job completed on the new primary. */
  recoveryMs: number;
  /** Acknowledged enqueues the new primary does not have. */
  missing: Acked[];
  /** Per job on the new primary: its state. */
  states: Map<string, string>;
  counters: { state: string; counted: number; actual: number }[];
  occurrences: { token: string; jobs: number }[];
  completedEvents: { id: string; pid: number; at: number }[];
  /** Read while the fleet still runs. */
  leaders: { overlapping: number; leadersAtEnd: number };
}

/** Runs the fleet and the stream, fails the primary over to the standby, and reads what the new primary holds. */
async function failOver(primary: StartedPrimary, standby: Standby, fleet: WorkerProcess[], apps: INestApplicationContext[]): Promise<Outcome> {
  const hosts = [`127.0.0.1:${primary.port}`, `127.0.0.1:${standby.port}`];
  await migrate(primary.url);
  const stampeded = {
    worker: { pollIntervalMs: 200, heartbeatIntervalMs: 1000 },
    maintenance: { leaderCheckIntervalMs: 500, reapIntervalMs: 1000, reapDeadAfter: 15_000 },
    schedules: { pollIntervalMs: 200 },
  };
  for (let i = 0; i < PROCESSES; i++) fleet.push(WorkerProcess.start({ url: primary.url, hosts, tasks: 'failover', tick: true, stampeded }));
  await Promise.all(fleet.map((p) => p.ready()));
  const app = await bootEnqueuer(primary.url, hosts);
  apps.push(app);
  const stream = new Stream(app.get(QueueService));

  await new Promise((r) => setTimeout(r, BEFORE_MS));
  const held: string[] = [];
  if (!standby.synchronous) {
    const queue = app.get(QueueService);
    for (let i = 0; i < HELD; i++) held.push((await queue.enqueue('witnessed', { ms: HELD_MS }, { queue: 'failover', delayMs: HELD_DUE_MS })).id);
    const finishing: string[] = [];
    for (let i = 0; i < FINISHING; i++) finishing.push((await queue.enqueue('witnessed', { ms: FINISHING_MS }, { queue: 'failover' })).id);
    for (const id of [...held, ...finishing]) stream.acked.push({ id, at: Date.now() });
    await waitFor(() => finishing.every((id) => fleet.some((p) => p.has('run', (e) => e.id === id))), 'the finishing jobs to start');
    await standby.caughtUp();
  }
  const pausedAt = Date.now();
  let pauseDoneAt = pausedAt;
  if (!standby.synchronous) {
    await standby.pauseStreaming();
    pauseDoneAt = Date.now();
    await new Promise((r) => setTimeout(r, UNREPLICATED_MS));
  }
  const killedAt = Date.now();
  await primary.kill('SIGKILL');
  const deadAt = Date.now();
  await standby.promote();
  const promotedAt = Date.now();
  await new Promise((r) => setTimeout(r, AFTER_MS));
  await stream.stop();

  const sql = new pg.Pool({ connectionString: standby.url, max: 2 });
  try {
    const ids = stream.acked.map((a) => a.id);
    // Every job the new primary holds runs to completion: those enqueued
    // before the kill and those after.
    await waitFor(
      async () => {
        const { rows } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE queue = 'failover' AND state <> 'completed'`);
        return rows[0].n === 0;
      },
      'every job on the new primary to complete',
      60_000,
      100,
    );
    const { rows: jobRows } = await sql.query<{ id: string; state: string }>(`SELECT id::text, state FROM stampeded_jobs WHERE id = ANY($1::uuid[])`, [ids]);
    const states = new Map(jobRows.map((r) => [r.id, r.state]));
    const [{ first }] = (
      await sql.query<{ first: number | null }>(
        `SELECT (extract(epoch FROM min(finished_at)) * 1000)::float8 AS first FROM stampeded_jobs
          WHERE queue = 'failover' AND state = 'completed' AND finished_at > to_timestamp($1::float8 / 1000)`,
        // After the old primary had exited: a commit there in its last moments reached a synchronous standby too.
        [deadAt],
      )
    ).rows;
    const { rows: counters } = await sql.query<{ state: string; counted: number; actual: number }>(
      `SELECT s.state, coalesce((SELECT sum(n) FROM stampeded_queue_counts c WHERE c.queue = 'failover' AND c.state = s.state), 0)::int AS counted,
              (SELECT count(*) FROM stampeded_jobs j WHERE j.queue = 'failover' AND j.state = s.state)::int AS actual
         FROM unnest(ARRAY['available','claimed','executing','retryable','completed','discarded','cancelled']) AS s(state)`,
    );
    const { rows: occurrences } = await sql.query<{ token: string; jobs: number }>(
      `SELECT o.occurrence_token AS token, (SELECT count(*) FROM stampeded_jobs j WHERE j.id = o.job_id)::int AS jobs
         FROM stampeded_cron_occurrences o WHERE o.cron_key = 'tick' ORDER BY 1`,
    );
    const leaders = leadership(fleet);
    await Promise.all(fleet.map((p) => p.stop()));
    const completedEvents = fleet.flatMap((p) =>
      p.events.filter((e) => e.event === 'completed').map((e) => ({ id: String(e.id), pid: p.pid, at: Number(e.at) })),
    );
    return {
      acked: stream.acked,
      failedEnqueues: stream.failed,
      runs: runsOf(fleet),
      fleet,
      held,
      pausedAt,
      pauseDoneAt,
      killedAt,
      deadAt,
      promotedAt,
      recoveryMs: first === null ? NaN : first - killedAt,
      missing: stream.acked.filter((a) => !states.has(a.id)),
      states,
      counters,
      occurrences,
      completedEvents,
      leaders,
    };
  } finally {
    await sql.end();
  }
}

function summary(mode: string, o: Outcome, extra: string): void {
  process.stderr.write(
    `failover (${mode}): ${o.acked.length} enqueues acknowledged, ${o.failedEnqueues} failed during the outage; ` +
      `promoted ${o.promotedAt - o.killedAt} ms after the kill, first job completed on the new primary ${Math.round(o.recoveryMs)} ms after the kill; ${extra}\n`,
  );
}

describe.each([
  { mode: 'synchronous', synchronous: true },
  { mode: 'asynchronous', synchronous: false },
])('a failover to a $mode standby, under a fleet and a stream of enqueues', ({ mode, synchronous }) => {
  let primary: StartedPrimary;
  let standby: Standby;
  const fleet: WorkerProcess[] = [];
  const apps: INestApplicationContext[] = [];

  beforeAll(async () => {
    primary = await startPrimary();
    standby = await startStandby(primary, { synchronous, name: synchronous ? 'sync1' : 'async1' });
  });

  afterAll(async () => {
    for (const app of apps) await app.close().catch(() => {});
    await Promise.all(fleet.map((p) => p.stop()));
    await standby?.stop();
    await primary?.stop();
  });

  it(
    synchronous
      ? 'loses nothing committed, runs no job twice, keeps one leader and one firing per schedule slot'
      : 'runs every job it kept at least once, fences the outcomes of claims it lost, and keeps its counters exact',
    async () => {
      const o = await failOver(primary, standby, fleet, apps);
      const pairs = overlaps(o.runs);
      const ended = (id: string) => o.runs.filter((r) => r.id === id && r.end !== undefined);
      const finished = (id: string) => ended(id).filter((r) => !r.aborted);
      const completedAfterKill = new Map<string, number>();
      for (const e of o.completedEvents) if (e.at > o.deadAt) completedAfterKill.set(e.id, (completedAfterKill.get(e.id) ?? 0) + 1);

      // Whatever the mode: the app reached the new primary, every job there
      // completed, no job's outcome was recorded twice on it, its counters
      // agree with its rows, one process leads, one job per schedule slot.
      expect(o.recoveryMs).toBeGreaterThan(0);
      expect(
        [...completedAfterKill]
          .filter(([, n]) => n > 1)
          .map(([id]) => ({ id, runs: o.runs.filter((r) => r.id === id), completed: o.completedEvents.filter((e) => e.id === id), deadAt: o.deadAt })),
      ).toEqual([]);
      expect(o.counters.filter((c) => c.counted !== c.actual)).toEqual([]);
      const { overlapping, leadersAtEnd } = o.leaders;
      expect(overlapping).toBe(0);
      expect(leadersAtEnd).toBe(1);
      expect(o.occurrences.filter((x) => x.jobs !== 1)).toEqual([]);
      expect(new Set(o.occurrences.map((x) => x.token)).size).toBe(o.occurrences.length);

      if (synchronous) {
        // Every enqueue that returned is there and completed, and ran to its
        // end once: a completion that returned was never lost.
        expect(o.missing).toEqual([]);
        expect(o.acked.filter((a) => o.states.get(a.id) !== 'completed')).toEqual([]);
        expect(o.acked.filter((a) => ended(a.id).length !== 1).map((a) => ({ id: a.id, runs: o.runs.filter((r) => r.id === a.id) }))).toEqual([]);
        expect(pairs).toEqual([]);
        summary(mode, o, `${o.runs.length} runs, none twice, no overlap`);
        return;
      }

      // Asynchronous: what the primary committed after streaming stopped is
      // gone. Only enqueues acknowledged after that may be missing.
      expect(o.missing.filter((a) => a.at < o.pausedAt)).toEqual([]);
      const kept = o.acked.filter((a) => o.states.has(a.id));
      expect(kept.filter((a) => o.states.get(a.id) !== 'completed')).toEqual([]);
      // At least once: every job kept ran to its end at least once.
      expect(kept.filter((a) => finished(a.id).length === 0)).toEqual([]);
      // Completions lost with the unreplicated commits: recorded on the old
      // primary after streaming stopped, for a job the new primary kept. Each
      // such job ran again after the failover.
      const lostCompletions = [...new Set(o.completedEvents.filter((e) => e.at > o.pauseDoneAt && e.at < o.deadAt && o.states.has(e.id)).map((e) => e.id))];
      expect(lostCompletions.filter((id) => !finished(id).some((r) => r.start > o.deadAt))).toEqual([]);
      // Claims lost: a worker runs the job across the failover, believing it
      // holds it, while the new primary has it waiting. Once the worker
      // reaches the new primary it finds the claim gone and stops the run
      // (its signal fires; its outcome would be fenced off), and the job runs
      // again, here or elsewhere; or the worker claimed it again first, and
      // the run under way stands for that claim. Either way one completion.
      const heldRuns = o.held.map((id) => ({ id, runs: ended(id), stale: ended(id).find((r) => r.start < o.deadAt) }));
      // Those claimed before the old primary died were running then; one
      // that a busy fleet claimed only later ran once, as any job. How many
      // a fleet claims inside the window varies with the machine's load:
      // lost-outcomes.e2e-spec.ts makes one such claim on purpose.
      const claimedBefore = heldRuns.filter((h) => h.stale);
      expect(claimedBefore.filter((h) => h.stale!.end! < o.deadAt)).toEqual([]);
      expect(heldRuns.filter((h) => !h.stale && h.runs.length !== 1)).toEqual([]);
      expect(o.held.filter((id) => o.states.get(id) !== 'completed' || completedAfterKill.get(id) !== 1)).toEqual([]);
      const fenced = claimedBefore.filter((h) => h.runs.length > 1);
      for (const h of fenced) {
        expect(h.stale).toMatchObject({ aborted: true });
        expect(o.completedEvents.filter((e) => e.id === h.id && e.pid === h.stale!.pid && e.at > h.stale!.start && e.at <= h.stale!.end!)).toEqual([]);
      }
      const adopted = claimedBefore.filter((h) => h.runs.length === 1);
      // The jobs started before streaming stopped and finished after were among them.
      expect(lostCompletions.length).toBeGreaterThan(0);
      // No overlap but between a run whose claim the failover lost and the job's next run.
      const unexplained = pairs.filter(([a]) => !fenced.some((h) => h.id === a.id));
      expect(unexplained).toEqual([]);
      summary(
        mode,
        o,
        `${o.missing.length} acknowledged enqueues lost, ${lostCompletions.length} completions lost and run again, ` +
          `of ${claimedBefore.length} jobs claimed on the old primary alone: ${fenced.length} stopped and run again (${pairs.length} overlapping, for ${Math.round(pairs.reduce((n, [a, b]) => n + Math.min(a.end!, b.end!) - Math.max(a.start, b.start), 0) / Math.max(1, pairs.length))} ms on average), ${adopted.length} claimed again by their own worker and run once`,
      );
    },
    FULL ? 240_000 : 120_000,
  );
});
