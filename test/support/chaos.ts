import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import pg from 'pg';

/**
 * The witness: every handler writes a row here when it starts and stamps it
 * when it ends, with the database's clock (the one clock every process
 * shares, skewed or not); a trigger writes every outcome recorded for a job
 * that was executing, with the worker and the attempt the row held when the
 * outcome arrived. From the two, the suite counts executions per job.
 */
export const LEDGER_SQL = `
CREATE TABLE chaos_ledger (
    id          bigserial PRIMARY KEY,
    job_id      uuid        NOT NULL,
    attempt     int         NOT NULL,
    worker_id   uuid,
    pid         int         NOT NULL,
    started_at  timestamptz NOT NULL,
    ended_at    timestamptz
);
CREATE INDEX ON chaos_ledger (job_id);
-- One row per execution: a worker runs an attempt of a job at most once. A
-- start whose answer was lost to a restart is written again by the handler,
-- and must not leave a second row that never ends.
CREATE UNIQUE INDEX ON chaos_ledger (job_id, attempt, worker_id);

-- Processes that crashed (kill -9, a fatal error): an execution with no end
-- ended then. A clean exit (SIGTERM) is not one: it must leave nothing open.
CREATE TABLE chaos_deaths (pid int PRIMARY KEY, died_at timestamptz NOT NULL DEFAULT clock_timestamp());

CREATE TABLE chaos_outcomes (
    job_id      uuid        NOT NULL,
    old_state   text        NOT NULL,
    new_state   text        NOT NULL,
    claimed_by  uuid,
    attempt     int         NOT NULL,
    failure_kind text,
    at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ON chaos_outcomes (job_id);

CREATE FUNCTION chaos_record_outcome() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos_outcomes (job_id, old_state, new_state, claimed_by, attempt, failure_kind)
    VALUES (OLD.id, OLD.state, NEW.state, OLD.claimed_by, OLD.attempt, NEW.failure_kind);
    RETURN NULL;
END $$;
CREATE TRIGGER chaos_outcome_trg AFTER UPDATE ON stampeded_jobs
    FOR EACH ROW WHEN (OLD.state = 'executing' AND NEW.state <> 'executing')
    EXECUTE FUNCTION chaos_record_outcome();

-- Fault injection for 40P01 and 40001: while chaos_fault_every > 0, every
-- n-th UPDATE statement on the jobs table fails as a deadlock or a
-- serialization failure would. A sequence, because it is not rolled back
-- with the statement it fails.
CREATE SEQUENCE chaos_fault_seq;
CREATE TABLE chaos_settings (fault_every int NOT NULL DEFAULT 0);
INSERT INTO chaos_settings VALUES (0);
CREATE FUNCTION chaos_inject_fault() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    every int := (SELECT fault_every FROM chaos_settings);
    n bigint;
BEGIN
    IF every > 0 THEN
        n := nextval('chaos_fault_seq');
        IF n % every = 0 THEN
            IF (n / every) % 2 = 0 THEN
                RAISE EXCEPTION 'chaos: injected deadlock' USING ERRCODE = '40P01';
            ELSE
                RAISE EXCEPTION 'chaos: injected serialization failure' USING ERRCODE = '40001';
            END IF;
        END IF;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER chaos_fault_trg BEFORE UPDATE ON stampeded_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION chaos_inject_fault();
`;

/**
 * The local TCP ports of a process's sockets, from /proc: how the suite
 * finds one worker's backends in pg_stat_activity (client_port) to cut them,
 * since every Stampeded connection has the same application_name.
 */
export function tcpPortsOf(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch {
      // closed while we looked
    }
  }
  const ports: number[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length > 9 && inodes.has(cols[9])) ports.push(parseInt(cols[1].split(':')[1], 16));
    }
  }
  return ports;
}

export interface LoadOptions {
  jobs: number;
  perSecond: number;
  /** Each job sleeps a random time from 0 to this, in ms. */
  maxJobMs: number;
  task?: string;
}

/**
 * A steady stream of jobs, inserted with ids chosen here so that an insert
 * whose answer was lost to an outage can be sent again without a duplicate.
 */
export class Load {
  readonly ids: string[] = [];
  enqueued = 0;
  readonly done: Promise<void>;

  constructor(
    private readonly pool: pg.Pool,
    private readonly options: LoadOptions,
  ) {
    for (let i = 0; i < options.jobs; i++) this.ids.push(randomUUID());
    this.done = this.run();
  }

  private async run(): Promise<void> {
    const tickMs = 50;
    const perTick = Math.max(1, Math.round((this.options.perSecond * tickMs) / 1000));
    const started = Date.now();
    for (let tick = 0; this.enqueued < this.ids.length; tick++) {
      const batch = this.ids.slice(this.enqueued, this.enqueued + perTick);
      await this.insert(batch);
      this.enqueued += batch.length;
      const next = started + (tick + 1) * tickMs;
      await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
    }
  }

  private async insert(ids: string[]): Promise<void> {
    const deadline = Date.now() + 120_000;
    for (;;) {
      try {
        await this.pool.query(
          `INSERT INTO stampeded_jobs (id, queue, task, args, expire_seconds, max_interruptions, dead_letter_queue)
           SELECT id, 'chaos', $2, jsonb_build_object('ms', floor(random() * $3)::int), 120, 10, 'chaos-dead'
             FROM unnest($1::uuid[]) AS id
           ON CONFLICT DO NOTHING`,
          [ids, this.options.task ?? 'ledgered', this.options.maxJobMs],
        );
        return;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
}

export interface Verdict {
  enqueued: number;
  completed: number;
  discarded: number;
  /** Not completed by the deadline. */
  lost: number;
  /**
   * Jobs completed more than once, or whose handler ran to its end more than
   * once in processes that did not crash.
   */
  duplicated: number;
  /**
   * Jobs run again because their process crashed after the handler finished
   * and before the completion was committed: what at-least-once costs.
   */
  rerunAfterCrash: number;
  /** Pairs of executions of one job that overlapped in time. */
  overlapping: number;
  /** Completions recorded by a worker that was not running that attempt to its end. */
  unfenced: number;
  executions: number;
  reaped: number;
}

/** What the database says happened to `ids`, from the jobs, the ledger and the outcome log. */
export async function verdict(sql: pg.ClientBase | pg.Pool, ids: string[]): Promise<Verdict> {
  const q = async (text: string) => Number((await sql.query(text, [ids])).rows[0].n);
  const [states] = (
    await sql.query(
      `SELECT count(*) FILTER (WHERE state = 'completed')::int AS completed,
              count(*) FILTER (WHERE state = 'discarded')::int AS discarded,
              count(*) FILTER (WHERE failure_kind = 'worker_missing' OR 'worker stopped heartbeating; job reclaimed' = last_error)::int AS reaped
         FROM stampeded_jobs WHERE id = ANY($1::uuid[])`,
      [ids],
    )
  ).rows;
  const duplicated = await q(
    `SELECT count(*) AS n FROM (
        SELECT job_id FROM chaos_ledger l WHERE job_id = ANY($1::uuid[])
           AND NOT EXISTS (SELECT 1 FROM chaos_deaths d WHERE d.pid = l.pid)
         GROUP BY job_id HAVING count(ended_at) > 1
        UNION
        SELECT job_id FROM chaos_outcomes WHERE job_id = ANY($1::uuid[]) AND new_state = 'completed' GROUP BY job_id HAVING count(*) > 1
     ) d`,
  );
  // An execution with no end ended when its process died; with neither, it
  // is still going, and overlaps anything that started after it.
  const overlapping = await q(
    `WITH runs AS (
        SELECT l.id, l.job_id, l.started_at, coalesce(l.ended_at, d.died_at, 'infinity') AS ended_at
          FROM chaos_ledger l LEFT JOIN chaos_deaths d USING (pid)
         WHERE l.job_id = ANY($1::uuid[]))
     SELECT count(*) AS n FROM runs a JOIN runs b ON a.job_id = b.job_id AND a.id < b.id
      WHERE a.started_at < b.ended_at AND b.started_at < a.ended_at`,
  );
  const unfenced = await q(
    `SELECT count(*) AS n FROM chaos_outcomes o
      WHERE o.job_id = ANY($1::uuid[]) AND o.new_state = 'completed'
        AND NOT EXISTS (
            SELECT 1 FROM chaos_ledger l
             WHERE l.job_id = o.job_id AND l.attempt = o.attempt AND l.worker_id = o.claimed_by
               AND l.ended_at IS NOT NULL AND l.ended_at <= o.at)`,
  );
  const rerunAfterCrash = await q(
    `SELECT count(DISTINCT l.job_id) AS n FROM chaos_ledger l JOIN chaos_deaths d USING (pid)
      WHERE l.job_id = ANY($1::uuid[]) AND l.ended_at IS NOT NULL
        AND EXISTS (SELECT 1 FROM chaos_ledger r WHERE r.job_id = l.job_id AND r.started_at > l.ended_at)`,
  );
  const executions = await q(`SELECT count(*) AS n FROM chaos_ledger WHERE job_id = ANY($1::uuid[])`);
  return {
    enqueued: ids.length,
    completed: states.completed,
    discarded: states.discarded,
    lost: ids.length - states.completed,
    duplicated,
    rerunAfterCrash,
    overlapping,
    unfenced,
    executions,
    reaped: states.reaped,
  };
}

/** Polls until every job in `ids` is in `states` (or the deadline); answers when, in ms since `since`. */
export async function settled(sql: pg.Pool, ids: string[], since: number, timeoutMs: number, states = ['completed']): Promise<number | null> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const { rows } = await sql.query(`SELECT count(*)::int AS n FROM stampeded_jobs WHERE id = ANY($1::uuid[]) AND state = ANY($2::text[])`, [ids, states]);
      if (rows[0].n === ids.length) return Date.now() - since;
    } catch {
      // the server may be restarting
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return null;
}
