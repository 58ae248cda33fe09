import { readFileSync } from 'node:fs';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { QueueService, SeedMismatchError, Task, migrate, stampededMigrations, type AppliedChanges, type TaskHandler } from '@stampeded/nestjs';
import { MIGRATION_FILES } from '@stampeded/nestjs/internal';
import type { TestDatabase } from '@stampeded/testing';
import { cli, spawnCli } from '../support/cli.js';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';

// A database another runtime set up: the seed's SQL ("stampeded 0.3.1",
// migration 1 verbatim) run as-is through a plain client, a queue made with
// the seed's stampeded_create_queue, a job inserted. Then a Nest app migrates.
const SEED_SQL = readFileSync(new URL('../../libs/stampeded/src/sql/migrations/0001_seed.sql', import.meta.url), 'utf8');

const handled: { n: number; attempt: number }[] = [];

@Task('adopt-mail', { queue: 'mail' })
class AdoptMail implements TaskHandler<{ n: number }> {
  handle(args: { n: number }, ctx: { attempt: number }) {
    handled.push({ n: args.n, attempt: ctx.attempt });
  }
}

/** Another runtime's side: the seed's functions, called with the seed's signatures and nothing of ours. */
function otherRuntime(sql: pg.Client) {
  const one = async (text: string, params: unknown[] = []) => (await sql.query(text, params)).rows[0];
  return {
    registerWorker: async (): Promise<string> =>
      (await one(`INSERT INTO stampeded_workers (hostname, pid, queues) VALUES ('ruby-host', 4242, '{mail,ruby}') RETURNING id`)).id,
    heartbeat: (worker: string) => sql.query(`SELECT stampeded_heartbeat($1::uuid)`, [worker]),
    claim: async (queue: string, worker: string): Promise<{ id: string; attempt: number; state: string } | undefined> =>
      one(`SELECT id, attempt, state FROM stampeded_claim($1::text, $2::uuid, $3::integer)`, [queue, worker, 1]),
    touch: async (queue: string, id: string, worker: string, attempt: number) =>
      (await one(`SELECT stampeded_touch($1::text, $2::uuid, $3::uuid, $4::smallint) AS ok`, [queue, id, worker, attempt])).ok,
    checkpoint: async (queue: string, id: string, worker: string, attempt: number, state: object) =>
      (await one(`SELECT stampeded_checkpoint($1::text, $2::uuid, $3::uuid, $4::smallint, $5::jsonb) AS seq`, [queue, id, worker, attempt, state])).seq,
    release: (queue: string, id: string, worker: string, attempt: number) =>
      one(`SELECT was, now_state, owned FROM stampeded_release($1::text, $2::uuid, $3::uuid, $4::smallint)`, [queue, id, worker, attempt]),
    fail: (queue: string, id: string, worker: string, attempt: number, error: string) =>
      one(`SELECT was, now_state, dead_lettered FROM stampeded_fail($1::text, $2::uuid, $3::uuid, $4::smallint, $5::text, $6::text, $7::bigint)`, [
        queue,
        id,
        worker,
        attempt,
        'raised',
        error,
        0,
      ]),
    complete: (queue: string, id: string, worker: string, attempt: number) =>
      one(`SELECT was, now_state, owned FROM stampeded_complete($1::text, $2::uuid, $3::uuid, $4::smallint)`, [queue, id, worker, attempt]),
    expire: async () => (await sql.query(`SELECT out_id FROM stampeded_expire($1::integer)`, [100])).rows.map((r) => r.out_id),
    reap: async () => (await sql.query(`SELECT id FROM stampeded_reap($1::interval)`, ['5 minutes'])).rows.map((r) => r.id),
    prune: async () => (await one(`SELECT stampeded_prune($1::interval, $2::integer, $3::interval) AS n`, ['1 hour', 1000, '7 days'])).n,
    createQueue: (queue: string) => sql.query(`SELECT stampeded_create_queue($1::text, $2::boolean)`, [queue, false]),
    recount: (queue: string) => sql.query(`SELECT stampeded_recount_queue($1::text)`, [queue]),
    partitionHealth: async () => (await sql.query(`SELECT partition, has_notify, has_counts FROM stampeded_partition_health()`)).rows,
    claimDueSchedules: async () => (await sql.query(`SELECT key FROM stampeded_claim_due_schedules($1::integer)`, [10])).rows.map((r) => r.key),
    fireSchedule: async (key: string) =>
      (await one(`SELECT stampeded_fire_schedule($1::text, $2::timestamptz) AS id`, [key, new Date('2100-01-01T00:00:00Z')])).id,
  };
}

/** The starting point: the seed run as-is, queue "mail", one job in it. */
async function seedInstalledByAnotherRuntime(sql: pg.Client): Promise<string> {
  await sql.query(SEED_SQL);
  await sql.query(`SELECT stampeded_create_queue('mail')`);
  const { rows } = await sql.query(`INSERT INTO stampeded_jobs (queue, task, args) VALUES ('mail', 'adopt-mail', '{"n": 1}') RETURNING id`);
  return rows[0].id;
}

/** Each (queue, state) with jobs, counted from the jobs themselves. */
async function countedJobs(sql: pg.Client): Promise<Record<string, number>> {
  const { rows } = await sql.query(`SELECT queue || ':' || state AS k, count(*)::int AS n FROM stampeded_jobs GROUP BY 1`);
  return Object.fromEntries(rows.map((r) => [r.k, r.n]));
}

/** Each (queue, state) the counters hold, summed over the slots when there are slots. */
async function counters(sql: pg.Client): Promise<Record<string, number>> {
  const { rows } = await sql.query(`SELECT queue || ':' || state AS k, sum(n)::int AS n FROM stampeded_queue_counts GROUP BY 1 HAVING sum(n) <> 0`);
  return Object.fromEntries(rows.map((r) => [r.k, r.n]));
}

/** Every job's row, by id; with `columns`, only those (the ones the other runtime wrote, before the later migrations added theirs). */
async function jobRows(sql: pg.Client, columns?: string[]): Promise<Record<string, unknown>[]> {
  const { rows } = await sql.query(`SELECT to_jsonb(j) AS row FROM stampeded_jobs j ORDER BY id`);
  return rows.map((r) => (columns ? Object.fromEntries(columns.map((c) => [c, r.row[c]])) : r.row));
}

const adopters: [string, (url: string) => Promise<void>][] = [
  [
    'migrate()',
    async (url) => {
      const applied = await migrate(url);
      expect(applied.adopted).toMatchObject({ version: 1, name: 'seed' });
      expect(applied.migrations.map((m) => m.version)).toEqual(MIGRATION_FILES.slice(1).map((m) => m.version));
    },
  ],
  [
    "StampededModule.forRoot({ migrations: 'auto' })",
    async (url) => {
      const app = await bootApp(url, { stampeded: { migrations: 'auto', worker: { enabled: false } } });
      await app.close();
    },
  ],
  [
    'stampeded migrate',
    async (url) => {
      const run = await cli(url, ['migrate']);
      expect(run.code).toBe(0);
      expect(run.stdout).toMatch(
        /adopted the seed schema \("stampeded 0\.3\.1"\) already installed in schema "public" as migration 1; schema "public" migrated/,
      );
      expect(run.stderr).not.toMatch(/applied migration 1 /);
      expect(run.stderr).toMatch(/applied migration 2 \(maintenance\)/);
    },
  ],
];

describe('a database another runtime set up with the seed ("stampeded 0.3.1")', () => {
  const opened: { db: TestDatabase; sql: pg.Client }[] = [];
  async function freshDatabase(): Promise<{ db: TestDatabase; sql: pg.Client }> {
    const db = await testDatabase();
    const sql = await sqlClient(db.url);
    opened.push({ db, sql });
    return { db, sql };
  }
  afterAll(async () => {
    for (const { db, sql } of opened) {
      await sql.end().catch(() => {});
      await db.drop();
    }
  });

  it.each(adopters)('%s adopts it as migration 1, applies the rest without touching the jobs, and both runtimes keep running jobs', async (_label, adopt) => {
    const { db, sql } = await freshDatabase();
    const preexisting = await seedInstalledByAnotherRuntime(sql);
    const other = otherRuntime(sql);

    // Before: the other runtime works the job through the seed's functions
    // and leaves it due again, failed once.
    const worker = await other.registerWorker();
    await other.heartbeat(worker);
    let claimed = await other.claim('mail', worker);
    expect(claimed).toEqual({ id: preexisting, attempt: 1, state: 'executing' });
    expect(await other.touch('mail', preexisting, worker, 1)).toBe(true);
    expect(await other.checkpoint('mail', preexisting, worker, 1, { step: 1 })).toBe(1);
    expect(await other.release('mail', preexisting, worker, 1)).toEqual({ was: 'executing', now_state: 'available', owned: true });
    claimed = await other.claim('mail', worker);
    expect(claimed).toEqual({ id: preexisting, attempt: 1, state: 'executing' });
    expect(await other.fail('mail', preexisting, worker, 1, 'smtp down')).toEqual({ was: 'executing', now_state: 'retryable', dead_lettered: false });
    // Its own queue, a job completed and one left waiting there.
    await other.createQueue('ruby');
    await sql.query(`INSERT INTO stampeded_jobs (queue, task, args) VALUES ('ruby', 'ruby-report', '{"r": 1}'), ('ruby', 'ruby-report', '{"r": 2}')`);
    const done = await other.claim('ruby', worker);
    expect(await other.complete('ruby', done!.id, worker, 1)).toEqual({ was: 'executing', now_state: 'completed', owned: true });
    expect(await other.expire()).toEqual([]);
    expect(await other.reap()).toEqual([]);
    expect(await other.prune()).toBe(0);

    const countsBefore = await counters(sql);
    expect(countsBefore).toEqual(await countedJobs(sql));
    expect(countsBefore).toEqual({ 'mail:retryable': 1, 'ruby:completed': 1, 'ruby:available': 1 });
    const jobsBefore = await jobRows(sql);

    await adopt(db.url);

    const { rows: recorded } = await sql.query(`SELECT version, name FROM stampeded_schema_migrations ORDER BY version`);
    expect(recorded).toEqual(MIGRATION_FILES.map((m) => ({ version: m.version, name: m.name })));
    expect(await jobRows(sql, Object.keys(jobsBefore[0]))).toEqual(jobsBefore);
    expect(await counters(sql)).toEqual(countsBefore);
    expect(await migrate(db.url)).toEqual({ migrations: [], functions: [] });

    // Our worker runs the job the other runtime failed once; our app enqueues into the other runtime's queue.
    handled.length = 0;
    const app = await bootApp(db.url, { stampeded: { migrations: 'none' }, providers: [AdoptMail] });
    let enqueued: string[];
    try {
      await waitFor(() => handled.length === 1, 'the pre-existing job to run in our worker');
      expect(handled).toEqual([{ n: 1, attempt: 2 }]);
      await waitFor(
        async () => (await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [preexisting])).rows[0].state === 'completed',
        'the pre-existing job to be completed',
      );
      const queue = app.get(QueueService);
      enqueued = [];
      for (const r of [3, 4, 5]) enqueued.push((await queue.enqueue('ruby-report', { r }, { queue: 'ruby' })).id);
    } finally {
      await app.close();
    }
    const { rows: ran } = await sql.query(`SELECT state, attempt, errors->0->>'message' AS first_error, checkpoint FROM stampeded_jobs WHERE id = $1`, [
      preexisting,
    ]);
    expect(ran).toEqual([{ state: 'completed', attempt: 2, first_error: 'smtp down', checkpoint: null }]);

    // After: the other runtime works a job our app enqueued, and the one it left waiting, through the same functions.
    await other.heartbeat(worker);
    const waiting = await other.claim('ruby', worker);
    expect(waiting).toMatchObject({ attempt: 1, state: 'executing' });
    expect(await other.complete('ruby', waiting!.id, worker, 1)).toEqual({ was: 'executing', now_state: 'completed', owned: true });
    const ours = await other.claim('ruby', worker);
    expect(ours).toEqual({ id: enqueued[0], attempt: 1, state: 'executing' });
    expect(await other.touch('ruby', ours!.id, worker, 1)).toBe(true);
    expect(await other.checkpoint('ruby', ours!.id, worker, 1, { step: 1 })).toBe(1);
    expect(await other.release('ruby', ours!.id, worker, 1)).toEqual({ was: 'executing', now_state: 'available', owned: true });
    expect(await other.claim('ruby', worker)).toEqual({ id: enqueued[0], attempt: 1, state: 'executing' });
    expect(await other.fail('ruby', ours!.id, worker, 1, 'flaky')).toEqual({ was: 'executing', now_state: 'retryable', dead_lettered: false });

    // Our app's other two jobs are due before the retry (due from its
    // failure): claimed, one by a worker that will stop heartbeating.
    expect(await other.claim('ruby', worker)).toMatchObject({ id: enqueued[1] });
    const lost = await otherRuntime(sql).registerWorker();
    expect(await other.claim('ruby', lost)).toMatchObject({ id: enqueued[2] });

    // The retry, and its completion, fenced by attempt.
    expect(await other.claim('ruby', worker)).toEqual({ id: enqueued[0], attempt: 2, state: 'executing' });
    expect(await other.complete('ruby', ours!.id, worker, 1)).toBeUndefined();
    expect(await other.complete('ruby', ours!.id, worker, 2)).toEqual({ was: 'executing', now_state: 'completed', owned: true });

    // The expirer, on a job whose heartbeat is older than its expiry, and the
    // reaper, on the job of the worker that stopped heartbeating.
    await sql.query(`UPDATE stampeded_jobs SET heartbeat_at = now() - interval '2 hours' WHERE id = $1`, [enqueued[1]]);
    expect(await other.expire()).toEqual([enqueued[1]]);
    await sql.query(`UPDATE stampeded_workers SET last_heartbeat = now() - interval '1 hour' WHERE id = $1`, [lost]);
    expect(await other.reap()).toEqual([enqueued[2]]);
    const { rows: outcomes } = await sql.query(`SELECT id, state, failure_kind FROM stampeded_jobs WHERE id = ANY($1::uuid[]) ORDER BY id`, [enqueued]);
    expect(outcomes).toEqual([
      { id: enqueued[0], state: 'completed', failure_kind: 'raised' },
      { id: enqueued[1], state: 'retryable', failure_kind: 'timed_out' },
      { id: enqueued[2], state: 'retryable', failure_kind: 'worker_missing' },
    ]);

    // A queue and a schedule made the seed's way after the adoption.
    await other.createQueue('ruby-late');
    await sql.query(`INSERT INTO stampeded_jobs (queue, task) VALUES ('ruby-late', 'late')`);
    await sql.query(`INSERT INTO stampeded_schedules (key, queue, task, interval_secs, next_run_at) VALUES ('nightly', 'ruby', 'ruby-report', 86400, now())`);
    expect(await other.claimDueSchedules()).toEqual(['nightly']);
    const fired = await other.fireSchedule('nightly');
    expect((await sql.query(`SELECT queue, task, state FROM stampeded_jobs WHERE id = $1`, [fired])).rows).toEqual([
      { queue: 'ruby', task: 'ruby-report', state: 'available' },
    ]);
    expect(await other.partitionHealth()).toEqual(
      ['stampeded_jobs_default', 'stampeded_jobs_mail', 'stampeded_jobs_ruby', 'stampeded_jobs_ruby_late'].map((partition) => ({
        partition,
        has_notify: true,
        has_counts: true,
      })),
    );
    expect(await other.prune()).toBe(0);

    // Counted exactly throughout, and after a recount.
    expect(await counters(sql)).toEqual(await countedJobs(sql));
    expect(await counters(sql)).toEqual({
      'mail:completed': 1,
      'ruby:completed': 3,
      'ruby:retryable': 2,
      'ruby:available': 1,
      'ruby-late:available': 1,
    });
    await other.recount('ruby');
    expect(await counters(sql)).toEqual(await countedJobs(sql));
  });

  it('two processes migrating at once: one adopts, the other finds it done', async () => {
    const { db, sql } = await freshDatabase();
    await seedInstalledByAnotherRuntime(sql);
    // Hold the runner's lock so that both are waiting on it before either starts.
    const holder = await sqlClient(db.url);
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT pg_advisory_xact_lock(hashtextextended('stampeded.migrate.public', 0))`);
      const both = [migrate(db.url), migrate(db.url)];
      await waitFor(
        async () =>
          (
            await sql.query(`SELECT count(*)::int AS n FROM pg_locks
                        WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
          ).rows[0].n === 2,
        'both migrations to wait on the lock',
      );
      await holder.query('COMMIT');
      const results: AppliedChanges[] = await Promise.all(both);
      expect(results.filter((r) => r.adopted).length).toBe(1);
      expect(results.find((r) => !r.adopted)).toEqual({ migrations: [], functions: [] });
    } finally {
      await holder.end();
    }
    const { rows } = await sql.query(`SELECT version FROM stampeded_schema_migrations ORDER BY version`);
    expect(rows.map((r) => r.version)).toEqual(MIGRATION_FILES.map((m) => m.version));
    expect(await counters(sql)).toEqual({ 'mail:available': 1 });
  });

  it("adopts an install beside the user's own tables and functions, and leaves those alone", async () => {
    const { db, sql } = await freshDatabase();
    await sql.query(`CREATE TABLE orders (id bigint PRIMARY KEY, total numeric NOT NULL)`);
    await sql.query(`INSERT INTO orders VALUES (1, 9.5), (2, 12)`);
    await sql.query(`CREATE FUNCTION order_total(p_id bigint) RETURNS numeric LANGUAGE sql AS $$ SELECT total FROM orders WHERE id = p_id $$`);
    await seedInstalledByAnotherRuntime(sql);
    expect((await migrate(db.url)).adopted).toMatchObject({ version: 1 });
    expect((await sql.query(`SELECT id::int, total::float FROM orders ORDER BY id`)).rows).toEqual([
      { id: 1, total: 9.5 },
      { id: 2, total: 12 },
    ]);
    expect((await sql.query(`SELECT order_total(2)::float AS t`)).rows[0].t).toBe(12);
    // Nothing is left of the reference that the check built.
    expect((await sql.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'stampeded%'`)).rows).toEqual([]);

    // And a new install into a schema that has the user's tables (no Stampeded there) runs migration 1 as always.
    const fresh = await freshDatabase();
    await fresh.sql.query(`CREATE TABLE orders (id bigint PRIMARY KEY)`);
    const applied = await migrate(fresh.db.url);
    expect(applied.adopted).toBeUndefined();
    expect(applied.migrations.map((m) => m.version)).toEqual(MIGRATION_FILES.map((m) => m.version));
  });

  it('adopts through the TypeORM classes as well', async () => {
    const { db, sql } = await freshDatabase();
    await seedInstalledByAnotherRuntime(sql);
    const dataSource = new DataSource({ type: 'postgres', url: db.url, migrations: stampededMigrations(), migrationsTransactionMode: 'all' });
    await dataSource.initialize();
    try {
      await dataSource.runMigrations();
    } finally {
      await dataSource.destroy();
    }
    const { rows } = await sql.query(`SELECT version FROM stampeded_schema_migrations ORDER BY version`);
    expect(rows.map((r) => r.version)).toEqual(MIGRATION_FILES.map((m) => m.version));
    expect(await counters(sql)).toEqual({ 'mail:available': 1 });
  });

  it('an app that does not migrate, and the CLI before `migrate`, say the install is there and that migrating adopts it', async () => {
    const { db, sql } = await freshDatabase();
    await seedInstalledByAnotherRuntime(sql);
    await expect(bootApp(db.url, { stampeded: { migrations: 'none', worker: { enabled: false } } })).rejects.toThrow(
      /holds Stampeded's tables, but no Stampeded migration is recorded there: another runtime installed the "stampeded 0\.3\.1" schema\. Run the migrations once/,
    );
    const status = await cli(db.url, ['status']);
    expect(status.code).toBe(3);
    expect(status.stderr).toMatch(/no Stampeded migration is recorded there.*Run `stampeded migrate --schema public` once/);
    expect((await cli(db.url, ['migrate'])).code).toBe(0);
    expect((await cli(db.url, ['status'])).code).toBe(0);
  });

  describe('refuses an install that is not exactly the seed, naming what differs and writing nothing', () => {
    const changes: [string, string, RegExp][] = [
      ['a column dropped', `ALTER TABLE stampeded_jobs DROP COLUMN destination CASCADE`, /column stampeded_jobs\.destination: missing \(the seed's: text\)/],
      [
        "a function's body changed",
        `CREATE OR REPLACE FUNCTION stampeded_touch(p_queue text, p_id uuid, p_worker_id uuid, p_attempt smallint) RETURNS boolean
         LANGUAGE sql AS $$ SELECT true $$`,
        /function stampeded_touch\(p_queue text, p_id uuid, p_worker_id uuid, p_attempt smallint\): its body differs from the seed's/,
      ],
      [
        "a function's signature changed",
        `DROP FUNCTION stampeded_heartbeat(uuid); CREATE FUNCTION stampeded_heartbeat(p_worker_id text) RETURNS void LANGUAGE sql AS $$ SELECT $$`,
        /function stampeded_heartbeat\(p_worker_id uuid\): missing[^\n]*\n\s+- function stampeded_heartbeat\(p_worker_id text\): not in the seed/,
      ],
      [
        'a default changed',
        `ALTER TABLE stampeded_jobs ALTER COLUMN max_attempts SET DEFAULT 5`,
        /column stampeded_jobs\.max_attempts: differs \(the seed's: smallint NOT NULL DEFAULT 25; found: smallint NOT NULL DEFAULT 5\)/,
      ],
      [
        'an index of its own on a seed table',
        `CREATE INDEX jobs_by_task ON stampeded_jobs (task)`,
        /index stampeded_jobs\.jobs_by_task: not in the seed \(btree \(task\)\)/,
      ],
      [
        "a queue's partition without its counters",
        `DROP TRIGGER stampeded_count_upd_trg ON stampeded_jobs_mail`,
        /queue partition stampeded_jobs_mail: trigger stampeded_count_upd_trg: missing/,
      ],
      ['a table missing', `DROP TABLE stampeded_queue_policies`, /table stampeded_queue_policies: missing \(the seed's: table\)/],
    ];

    it.each(changes)('%s', async (_label, change, difference) => {
      const { db, sql } = await freshDatabase();
      await seedInstalledByAnotherRuntime(sql);
      await sql.query(change);
      const refusal = await migrate(db.url).catch((err: unknown) => err);
      expect(refusal).toBeInstanceOf(SeedMismatchError);
      expect((refusal as Error).message).toMatch(
        /holds Stampeded tables or functions that no Stampeded migration recorded .* nothing was changed\. Make them match it/,
      );
      expect((refusal as Error).message).toMatch(difference);
      expect((refusal as SeedMismatchError).differences.length).toBeGreaterThan(0);
      expect((await sql.query(`SELECT to_regclass('stampeded_schema_migrations') AS t`)).rows[0].t).toBeNull();
    });

    it('through the module and the CLI too, the CLI listing every difference with exit code 3', async () => {
      const { db, sql } = await freshDatabase();
      await seedInstalledByAnotherRuntime(sql);
      await sql.query(`ALTER TABLE stampeded_jobs DROP COLUMN destination CASCADE`);
      await expect(bootApp(db.url, { stampeded: { migrations: 'auto', worker: { enabled: false } } })).rejects.toThrow(
        /column stampeded_jobs\.destination: missing/,
      );
      const run = await spawnCli(db.url, ['migrate']);
      expect(run.code).toBe(3);
      expect(run.stderr).toMatch(/not exactly that schema/);
      expect(run.stderr).toMatch(
        /\n\s+- column stampeded_jobs\.destination: missing[^\n]*\n\s+- index stampeded_jobs\.stampeded_jobs_destination_idx: missing/,
      );
      expect((await sql.query(`SELECT to_regclass('stampeded_schema_migrations') AS t`)).rows[0].t).toBeNull();
      expect(await counters(sql)).toEqual({ 'mail:available': 1 });
    });
  });
});
