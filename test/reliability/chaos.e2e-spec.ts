import { mkdirSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import { migrate } from '@stampeded/nestjs';
import { startPostgres, type StartedPostgres, type TestDatabase } from '@stampeded/testing';
import { testDatabase, waitFor } from '../support/test-app.js';
import { LEDGER_SQL, Load, settled, tcpPortsOf, verdict, type Verdict } from '../support/chaos.js';
import { WorkerProcess } from '../support/worker-process.js';

// The fault suite. Four worker processes under a steady load; every handler
// writes its execution into a ledger in the same database; each fault is
// injected mid-run and the database is then asked whether any job was lost,
// completed twice, run twice at once, or completed by a worker that had lost
// it. `npm test` runs the short version (a few hundred jobs a fault);
// `npm run test:chaos` (STAMPEDED_CHAOS=full) runs thousands a fault and the
// poison handlers, and prints the same table.
const FULL = process.env.STAMPEDED_CHAOS === 'full';
const JOBS = FULL ? 3000 : 300;
const RATE = FULL ? 300 : 150;
const FLEET = 4;
// Clocks off by minutes between the processes, for every fault: the queue
// must run on the database's clock alone.
const SKEWS = [0, 120_000, -120_000, 30_000];
const REAP_DEAD_AFTER_MS = 3000;

const STAMPEDED = {
  worker: { concurrency: 8, pollIntervalMs: 200, heartbeatIntervalMs: 250, shutdownTimeoutMs: 5000 },
  maintenance: {
    leaderCheckIntervalMs: 250,
    reapIntervalMs: 250,
    reapDeadAfter: REAP_DEAD_AFTER_MS,
    expireIntervalMs: 250,
  },
};

interface Figure extends Verdict {
  fault: string;
  recoveryMs: number | null;
  workerDeaths: number;
}
const figures: Figure[] = [];

/** Four workers, kept at four: a dead one is replaced, as a process manager would. */
class Fleet {
  readonly workers: WorkerProcess[] = [];
  readonly all: WorkerProcess[] = [];
  deaths = 0;
  private supervisor?: NodeJS.Timeout;
  private stopping = false;
  private replacing = false;

  constructor(
    private readonly url: string,
    private readonly sql: pg.Pool,
    private readonly stampeded: Record<string, unknown> = STAMPEDED,
  ) {}

  async start(): Promise<void> {
    for (let i = 0; i < FLEET; i++) this.spawn(i);
    await Promise.all(this.workers.map((w) => w.ready()));
    this.supervisor = setInterval(() => void this.replaceDead(), 100);
  }

  private spawn(slot: number, extra: { stampeded?: Record<string, unknown> } = {}): WorkerProcess {
    // A heap of 256 MB, so that the leaking handler runs out in a second,
    // as a container's memory limit would end it.
    const worker = WorkerProcess.start({
      url: this.url,
      tasks: 'chaos',
      unhandled: 'report',
      stampeded: this.stampeded,
      skewMs: SKEWS[slot % SKEWS.length],
      maxOldSpaceMb: 256,
      ...extra,
    });
    this.workers[slot] = worker;
    this.all.push(worker);
    return worker;
  }

  /** Records the death (the ledger's end for its open executions) and starts a replacement. */
  private async replaceDead(): Promise<void> {
    // One pass at a time: the interval fires again while a death is recorded.
    if (this.stopping || this.replacing) return;
    this.replacing = true;
    try {
      for (let slot = 0; slot < this.workers.length; slot++) {
        const worker = this.workers[slot];
        if (worker.alive) continue;
        this.deaths++;
        if (!this.stopping) this.spawn(slot);
        if (worker.child.exitCode !== 0) await this.recordDeath(worker);
      }
    } finally {
      this.replacing = false;
    }
  }

  async recordDeath(worker: WorkerProcess): Promise<void> {
    for (let i = 0; i < 100; i++) {
      try {
        await this.sql.query(`INSERT INTO chaos_deaths (pid) VALUES ($1) ON CONFLICT DO NOTHING`, [worker.pid]);
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /** A worker that is running a job right now, by the ledger. */
  async busyWorker(): Promise<{ worker: WorkerProcess; slot: number }> {
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      const { rows } = await this.sql.query(`SELECT DISTINCT pid FROM chaos_ledger WHERE ended_at IS NULL AND started_at > now() - interval '2 seconds'`);
      const pids = new Set(rows.map((r) => r.pid));
      const slot = this.workers.findIndex((w) => w.alive && pids.has(w.pid));
      if (slot >= 0) return { worker: this.workers[slot], slot };
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error('no worker was running a job');
  }

  async readyAll(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.ready()));
  }

  get unhandled(): string[] {
    return this.all.flatMap((w) => w.unhandled);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.supervisor);
    await Promise.all(this.all.map((w) => w.stop(15_000)));
  }
}

interface PhaseOptions {
  fault: string;
  jobs?: number;
  maxJobMs?: number;
  /** The workers whose in-flight jobs measure the recovery (all, if none). */
  choose?(): Promise<string[] | undefined>;
  inject(): Promise<void>;
  timeoutMs?: number;
}

async function phase(fleet: Fleet, sql: pg.Pool, options: PhaseOptions): Promise<Figure> {
  const deathsBefore = fleet.deaths;
  const load = new Load(sql, { jobs: options.jobs ?? JOBS, perSecond: RATE, maxJobMs: options.maxJobMs ?? 20 });
  // The fault lands mid-run: with a third of the load in, and jobs executing.
  while (load.enqueued < load.ids.length / 3) await new Promise((r) => setTimeout(r, 20));
  const affected = await options.choose?.();
  const inFlight = (
    await sql.query(
      `SELECT DISTINCT j.id::text FROM chaos_ledger l JOIN stampeded_jobs j ON j.id = l.job_id
        WHERE l.job_id = ANY($1::uuid[]) AND j.state = 'executing' AND ($2::uuid[] IS NULL OR j.claimed_by = ANY($2::uuid[]))`,
      [load.ids, affected ?? null],
    )
  ).rows.map((r) => r.id);
  const faultAt = Date.now();
  const timeoutMs = options.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  await options.inject();
  // Watched while the load goes on: the recovery is when the jobs the fault
  // caught are done, not when the load ends.
  const recovered = inFlight.length ? settled(sql, inFlight, faultAt, timeoutMs) : Promise.resolve(0);
  await load.done;
  const recoveryMs = await recovered;
  if ((await settled(sql, load.ids, faultAt, Math.max(0, deadline - Date.now()))) === null) {
    // What the stragglers look like, for whoever reads the failure.
    const { rows } = await sql.query(
      `SELECT state, failure_kind, claimed_by IS NOT NULL AS claimed, count(*)::int AS n,
              min(heartbeat_at) AS oldest_heartbeat, bool_or(EXISTS (SELECT 1 FROM chaos_ledger l WHERE l.job_id = j.id)) AS ran
         FROM stampeded_jobs j WHERE id = ANY($1::uuid[]) AND state <> 'completed' GROUP BY 1, 2, 3`,
      [load.ids],
    );
    process.stderr.write(`chaos ${options.fault}: not completed in time: ${JSON.stringify(rows)}\n`);
  }
  const figure: Figure = { fault: options.fault, ...(await verdict(sql, load.ids)), recoveryMs, workerDeaths: fleet.deaths - deathsBefore };
  figures.push(figure);
  if (figure.overlapping > 0) {
    // The evidence, for whoever reads the failure.
    const { rows } = await sql.query(
      `SELECT l.*, d.died_at FROM chaos_ledger l LEFT JOIN chaos_deaths d USING (pid)
        WHERE job_id IN (SELECT job_id FROM chaos_ledger WHERE job_id = ANY($1::uuid[]) GROUP BY job_id HAVING count(*) > 1)
        ORDER BY job_id, started_at LIMIT 40`,
      [load.ids],
    );
    process.stderr.write(`chaos ${options.fault}: executions of jobs run more than once: ${JSON.stringify(rows)}\n`);
  }
  process.stderr.write(`chaos ${JSON.stringify(figure)}\n`);
  return figure;
}

function expectClean(figure: Figure): void {
  expect({ lost: figure.lost, duplicated: figure.duplicated, overlapping: figure.overlapping, unfenced: figure.unfenced }).toEqual({
    lost: 0,
    duplicated: 0,
    overlapping: 0,
    unfenced: 0,
  });
  expect(figure.recoveryMs).not.toBeNull();
}

async function installLedger(url: string): Promise<pg.Pool> {
  await migrate(url);
  const sql = new pg.Pool({ connectionString: url, max: 4, application_name: 'chaos-suite' });
  sql.on('error', () => {});
  await sql.query(LEDGER_SQL);
  return sql;
}

afterAll(() => {
  if (!figures.length) return;
  const lines = [
    `fault suite (${FULL ? 'full' : 'short'}): ${FLEET} worker processes, clocks skewed by ${SKEWS.map((s) => `${s / 1000}s`).join('/')}`,
    'fault                              enqueued completed lost dup overlap unfenced reaped rerun deaths recovery',
    ...figures.map(
      (f) =>
        `${f.fault.padEnd(34)} ${String(f.enqueued).padStart(8)} ${String(f.completed).padStart(9)} ${String(f.lost).padStart(4)} ` +
        `${String(f.duplicated).padStart(3)} ${String(f.overlapping).padStart(7)} ${String(f.unfenced).padStart(8)} ` +
        `${String(f.reaped).padStart(6)} ${String(f.rerunAfterCrash).padStart(5)} ${String(f.workerDeaths).padStart(6)} ${f.recoveryMs === null ? 'never' : `${f.recoveryMs} ms`}`,
    ),
  ];
  process.stderr.write(`\n${lines.join('\n')}\n\n`);
  mkdirSync('.test-results', { recursive: true });
  writeFileSync(`.test-results/chaos-${FULL ? 'full' : 'short'}.json`, JSON.stringify(figures, null, 2));
});

describe('fault suite: one database, four workers', () => {
  let db: TestDatabase;
  let sql: pg.Pool;
  let fleet: Fleet;

  beforeAll(async () => {
    db = await testDatabase();
    sql = await installLedger(db.url);
    fleet = new Fleet(db.url, sql);
    await fleet.start();
  }, 60_000);

  afterAll(async () => {
    await fleet?.stop();
    await sql?.end();
    await db?.drop();
    expect(fleet?.unhandled).toEqual([]);
  }, 60_000);

  it('steady load on skewed clocks, no fault: every job once', async () => {
    const figure = await phase(fleet, sql, { fault: 'none (clocks skewed ±2 min)', inject: async () => {} });
    expectClean(figure);
    expect(figure.reaped).toBe(0);
  }, 90_000);

  it('kill -9 of a worker mid-job: its jobs are reaped and rerun, none twice at once', async () => {
    let victim!: WorkerProcess;
    const figure = await phase(fleet, sql, {
      fault: 'kill -9 of a worker mid-job',
      // Jobs of up to 200 ms, so that the victim is still running one when
      // the kill lands: with 20 ms jobs it could finish everything it held
      // between the check below and the signal, and leave nothing to reap.
      maxJobMs: 200,
      choose: async () => {
        ({ worker: victim } = await fleet.busyWorker());
        return [victim.workerId!];
      },
      inject: async () => {
        // Killed while it holds jobs: between choosing it and now it may have
        // finished the one it ran (on a loaded machine, often), and a worker
        // that holds nothing leaves nothing to reap.
        await waitFor(
          async () =>
            (
              await sql.query(`SELECT EXISTS (SELECT 1 FROM stampeded_jobs WHERE claimed_by = $1 AND state IN ('claimed', 'executing')) AS holds`, [
                victim.workerId,
              ])
            ).rows[0].holds || null,
          'the victim to hold a job',
          10_000,
          5,
        );
        await victim.kill();
        await fleet.recordDeath(victim);
      },
    });
    expectClean(figure);
    expect(figure.reaped).toBeGreaterThan(0);
    await fleet.readyAll();
  }, 90_000);

  it('SIGTERM under load: running jobs finish, the rest go back at once, nothing waits for the reaper', async () => {
    let victim!: WorkerProcess;
    const figure = await phase(fleet, sql, {
      fault: 'SIGTERM under load',
      choose: async () => {
        ({ worker: victim } = await fleet.busyWorker());
        return [victim.workerId!];
      },
      inject: async () => {
        expect(await victim.stop(30_000)).toEqual({ code: 0, signal: null });
      },
    });
    expectClean(figure);
    expect(figure.reaped).toBe(0);
    await fleet.readyAll();
  }, 90_000);

  it("one worker's connections cut (pg_terminate_backend) while its jobs run", async () => {
    let victim!: WorkerProcess;
    const figure = await phase(fleet, sql, {
      fault: "a worker's DB connections cut",
      choose: async () => {
        ({ worker: victim } = await fleet.busyWorker());
        return [victim.workerId!];
      },
      inject: async () => {
        const ports = tcpPortsOf(victim.pid);
        const { rows } = await sql.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE datname = current_database() AND client_port = ANY($1::int[]) AND application_name <> 'chaos-ledger'`,
          [ports],
        );
        expect(rows.length).toBeGreaterThan(0);
      },
    });
    expectClean(figure);
    // The worker lived through it: nobody was reaped, nobody died.
    expect(figure.workerDeaths).toBe(0);
  }, 90_000);

  it('deadlocks (40P01) and serialization failures (40001) are retried, not surfaced', async () => {
    const figure = await phase(fleet, sql, {
      fault: '40P01/40001 on every 10th update',
      inject: async () => {
        await sql.query(`UPDATE chaos_settings SET fault_every = 10`);
      },
    });
    const injected = Number((await sql.query(`SELECT last_value FROM chaos_fault_seq`)).rows[0].last_value);
    await sql.query(`UPDATE chaos_settings SET fault_every = 0`);
    expectClean(figure);
    expect(injected).toBeGreaterThan(20);
    const surfaced = await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE last_error LIKE '%chaos: injected%'`);
    expect(surfaced.rows[0].n).toBe(0);
  }, 90_000);

  it('a handler that hangs forever is timed out by its expiry and dead-lettered; the rest run on', async () => {
    // The worker's own timeout and the expirer race for the same attempt:
    // they once dead-lettered it twice (stampeded_fail locks the row before it reads it).
    const { rows } = await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, expire_seconds, max_attempts, dead_letter_queue) VALUES ('chaos', 'hangs', 1, 2, 'chaos-dead') RETURNING id::text`,
    );
    const figure = await phase(fleet, sql, { fault: 'a handler that hangs forever', jobs: Math.round(JOBS / 2), inject: async () => {} });
    expectClean(figure);
    await settled(sql, [rows[0].id], Date.now(), 30_000, ['discarded']);
    const [hung] = (await sql.query(`SELECT state, failure_kind, attempt FROM stampeded_jobs WHERE id = $1`, [rows[0].id])).rows;
    expect(hung).toEqual({ state: 'discarded', failure_kind: 'timed_out', attempt: 2 });
    const dead = await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE queue = 'chaos-dead' AND source_id = $1`, [rows[0].id]);
    expect(dead.rows[0].n).toBe(1);
  }, 90_000);

  it('a handler that kills its process every time is stopped by max_interruptions and dead-lettered', async () => {
    const deathsBefore = fleet.deaths;
    const { rows } = await sql.query(
      `INSERT INTO stampeded_jobs (queue, task, max_interruptions, dead_letter_queue) VALUES ('chaos', 'kills', 1, 'chaos-dead') RETURNING id::text`,
    );
    const figure = await phase(fleet, sql, { fault: 'a handler that kills its process', jobs: Math.round(JOBS / 2), inject: async () => {} });
    await settled(sql, [rows[0].id], Date.now(), 30_000, ['discarded']);
    const [poison] = (await sql.query(`SELECT state, failure_kind, interruptions FROM stampeded_jobs WHERE id = $1`, [rows[0].id])).rows;
    expect(poison).toEqual({ state: 'discarded', failure_kind: 'worker_missing', interruptions: 2 });
    expect((await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE queue = 'chaos-dead' AND source_id = $1`, [rows[0].id])).rows[0].n).toBe(1);
    // Two runs, two deaths: the budget, not a crash loop.
    expect(fleet.deaths - deathsBefore).toBe(2);
    expectClean(figure);
    await fleet.readyAll();
  }, 120_000);

  (FULL ? it : it.skip)(
    'a handler that leaks memory until its process dies: max_interruptions stops it, the rest run on',
    async () => {
      const deathsBefore = fleet.deaths;
      const { rows } = await sql.query(
        `INSERT INTO stampeded_jobs (queue, task, max_interruptions, dead_letter_queue) VALUES ('chaos', 'leaks', 1, 'chaos-dead') RETURNING id::text`,
      );
      const figure = await phase(fleet, sql, { fault: 'a handler that leaks memory', jobs: Math.round(JOBS / 2), inject: async () => {} });
      await settled(sql, [rows[0].id], Date.now(), 60_000, ['discarded']);
      const [leaky] = (await sql.query(`SELECT state, failure_kind, interruptions FROM stampeded_jobs WHERE id = $1`, [rows[0].id])).rows;
      expect(leaky).toEqual({ state: 'discarded', failure_kind: 'worker_missing', interruptions: 2 });
      expect(fleet.deaths - deathsBefore).toBe(2);
      expectClean(figure);
      await fleet.readyAll();
    },
    180_000,
  );
});

describe('fault suite: PostgreSQL stopped and restarted mid-run', () => {
  let server: StartedPostgres;
  let sql: pg.Pool;
  let fleet: Fleet;

  beforeAll(async () => {
    // A server of its own: the run's shared server must not go away under
    // the other test files.
    // Durable: with synchronous_commit off, a crash forgets commits that
    // the clients were told had happened, and the ledger would say so.
    server = await startPostgres({ ignoreDatabaseUrl: true, durable: true });
    if (!server.restart) return;
    sql = await installLedger(server.url);
    // While the server is down no worker can heartbeat: an outage longer
    // than the dead-after has live workers reaped after the restart and
    // their jobs run twice (not at once with their fenced-out first runs).
    // The dead-after must outlast the outage; under a loaded CI host a
    // 1-second stop and a crash recovery took over 3 s.
    fleet = new Fleet(server.url, sql, { ...STAMPEDED, maintenance: { ...STAMPEDED.maintenance, reapDeadAfter: 20_000 } });
    await fleet.start();
  }, 90_000);

  afterAll(async () => {
    await fleet?.stop();
    await sql?.end();
    await server?.stop();
    if (fleet) expect(fleet.unhandled).toEqual([]);
  }, 60_000);

  it.each(FULL ? (['immediate', 'fast'] as const) : (['immediate'] as const))(
    'restart (%s shutdown): workers reconnect and resume, no job lost, no crash',
    async (mode) => {
      if (!server.restart) {
        process.stderr.write(`skipped: a ${server.provider} server cannot be restarted by the suite\n`);
        return;
      }
      const figure = await phase(fleet, sql, {
        fault: `PostgreSQL restart (${mode}, 1 s down)`,
        inject: async () => {
          await server.restart!({ mode, downMs: 1000 });
        },
        timeoutMs: 40_000,
      });
      expectClean(figure);
      expect(figure.workerDeaths).toBe(0);
      expect(fleet.all.every((w) => w.alive)).toBe(true);
    },
    150_000,
  );
});
