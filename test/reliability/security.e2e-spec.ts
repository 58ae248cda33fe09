import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { INestApplicationContext } from '@nestjs/common';
import type pg from 'pg';
import {
  JobEvents,
  MaintenanceService,
  QueueService,
  SchedulesService,
  Task,
  migrate,
  type JobContext,
  type MaintenanceTaskName,
  type TaskHandler,
} from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';

// Security: no SQL built from user input (a source audit, and every entry
// point fed an injection attempt against a real database), and the runtime
// working with a least-privilege role alone. The dashboard's auth, CSRF and
// read-only mode are in test/dashboard/dashboard.e2e-spec.ts.

const PAYLOADS = [
  `'; DROP TABLE canary; --`,
  `" ; DROP TABLE canary; --`,
  `\\'; DROP TABLE canary; --`,
  `$$; DROP TABLE canary; $$`,
  `$1; DROP TABLE canary`,
  `%I%L%s'); DROP TABLE canary; --`,
  `x' OR '1'='1`,
  `) ; SELECT pg_sleep(5); --`,
];

@Task('echo', { queue: 'secure' })
class Echo implements TaskHandler<Record<string, unknown>> {
  readonly seen: Record<string, unknown>[] = [];
  handle(args: Record<string, unknown>, _ctx: JobContext) {
    this.seen.push(args);
  }
}

describe('security: no SQL built from user input', () => {
  // Every ${...} inside an SQL-looking template literal in the shipped
  // sources, with why it is not user input. A new one fails this test until
  // someone reads it and adds it here: parameters ($1) or quoteIdent(), never
  // a value spliced into the text.
  const REVIEWED: Record<string, string> = {
    DEDUP_KEY: 'a constant SQL expression (sql/enqueue.sql.ts)',
    INPUT_ROWS: 'a constant derived table reading the batch from $1 and $2 (sql/enqueue.sql.ts)',
    CLAIMED_COLUMNS: 'a constant column list (sql/claim.sql.ts)',
    PLAIN_COLUMNS: 'a constant column list, from JOB_COLUMNS (sql/enqueue.sql.ts)',
    PLAIN_VALUES: 'constant expressions over constant column names, from JOB_COLUMNS (sql/enqueue.sql.ts)',
    COMPLETE_MANY_CALL: 'a constant call of stampeded_complete_many over parameters (sql/jobs.sql.ts)',
    "EVENT_NAME('e.queue')": 'a constant expression over a constant column name (sql/jobs.sql.ts)',
    "EVENT_NAME('e.task')": 'a constant expression over a constant column name (sql/jobs.sql.ts)',
    "EVENT_NAME('j.queue')": 'a constant expression over a constant column name (sql/jobs.sql.ts)',
    "EVENT_NAME('j.task')": 'a constant expression over a constant column name (sql/jobs.sql.ts)',
    "EVENT_NAME('$1::text')": 'a constant expression over a parameter (sql/jobs.sql.ts)',
    "EVENT_NAME('$9::text')": 'a constant expression over a parameter (sql/jobs.sql.ts)',
    "EVENT_NAME('$6::text')": 'a constant expression over a parameter (sql/jobs.sql.ts)',
    JOBS_PER_NOTIFICATION: 'a constant number (sql/jobs.sql.ts)',
    key: "a placeholder, '$1' or '$2' by its type (sql/notifications.sql.ts lockHolders)",
    "lockHolders('$1')": 'a constant subquery over a parameter (sql/notifications.sql.ts)',
    "lockHolders('$2')": 'a constant subquery over a parameter (sql/notifications.sql.ts)',
    r: "KEYED_STATE's row alias, a constant from its callers: 'r' or 'input' (sql/enqueue.sql.ts)",
    earlier: "KEYED_STATE's constant condition on the batch rank: 'r.nth > 1' or 'input.nth > 1' (sql/enqueue.sql.ts)",
    NTH_OF_KEY: 'a constant window expression over constant column names (sql/enqueue.sql.ts)',
    "KEYED_STATE('r', 'r.nth > 1')": 'a constant expression over constant column names (sql/enqueue.sql.ts)',
    nthColumn: 'NTH_OF_KEY, a constant, or nothing (sql/enqueue.sql.ts enqueueStatement)',
    stateColumn: "the constant column name ', state', or nothing (sql/enqueue.sql.ts enqueueStatement)",
    stateValue: "KEYED_STATE's constant expression, or nothing (sql/enqueue.sql.ts enqueueStatement)",
    values:
      'constant expressions over constant column names or $n placeholders, from JOB_COLUMNS (sql/enqueue.sql.ts jobInputRows, enqueueStatement, ENQUEUE_ONE)',
    columns: 'a constant column list, from JOB_COLUMNS (sql/enqueue.sql.ts enqueueStatement, ENQUEUE_ONE)',
    definition: "constant column names and types: JOB_COLUMNS' and the caller's constant extra columns (sql/enqueue.sql.ts jobInputRows)",
    names: 'the constant column names of that definition (sql/enqueue.sql.ts jobInputRows)',
    WORKFLOW_INPUT: 'a constant row source with constant extra columns (sql/workflows.sql.ts)',
    COPIED: 'a constant column list (sql/dead-letters.sql.ts)',
    COPIED_VALUES: 'constant column names (sql/dead-letters.sql.ts)',
    FROM_SOURCE_COLUMNS: 'constant column names, from JOB_COLUMNS (sql/dead-letters.sql.ts)',
    FROM_SOURCE_VALUES: 'constant column names, from JOB_COLUMNS (sql/dead-letters.sql.ts)',
    SCHEDULE_COLUMNS: 'a constant column list',
    "sealedKeyIdSql('j.args')": 'a constant expression over a constant column name and ENVELOPE_KEY, a constant (sql/encryption.sql.ts)',
    "sealedKeyIdSql('j.result')": 'a constant expression over a constant column name and ENVELOPE_KEY, a constant (sql/encryption.sql.ts)',
    "sealedKeyIdSql('s.args')": 'a constant expression over a constant column name and ENVELOPE_KEY, a constant (sql/encryption.sql.ts)',
    "sealedKeyIdSql('args')": 'a constant expression over a constant column name and ENVELOPE_KEY, a constant (@stampeded/testing sql/jobs.sql.ts)',
    "SEALED_IV('j.args')": 'a constant expression over a constant column name and ENVELOPE_KEY, a constant (sql/encryption.sql.ts)',
    "SEALED_IV('j.result')": 'a constant expression over a constant column name and ENVELOPE_KEY, a constant (sql/encryption.sql.ts)',
    "SEALED_IV('s.args')": 'a constant expression over a constant column name and ENVELOPE_KEY, a constant (sql/encryption.sql.ts)',
    "EVENT_NAME('o.queue')": 'a constant expression over a column (sql/jobs.sql.ts)',
    "EVENT_NAME('o.task')": 'a constant expression over a column (sql/jobs.sql.ts)',
    "EVENT_NAME('m.queue')": 'a constant expression over a column (sql/jobs.sql.ts)',
    "EVENT_NAME('$5::text')": 'a constant expression over a parameter (sql/jobs.sql.ts)',
    FAIL_MANY_ROWS: "a constant row source over $n placeholders (sql/jobs.sql.ts, a chunk's failures)",
    CANCEL_CLAIMED_ROWS: "a constant row source over $n placeholders (sql/jobs.sql.ts, a chunk's cancels)",
    'jobInputRows(DEBOUNCE_INPUT_COLUMNS)': 'a constant row source over constant column definitions (sql/enqueue.sql.ts)',
    RUNTIME_META_KEY: "the constant meta key 'nestjs' (stampeded.constants.ts)",
    EXTENDED_AT: 'a constant expression over constant column names (sql/enqueue.sql.ts, debounce)',
    REPLACEABLE: "a constant predicate over the core's WAITING_STATES (sql/enqueue.sql.ts, debounce)",
    jobValues: 'constant expressions over constant column names, from JOB_COLUMNS (sql/enqueue.sql.ts ENQUEUE_DEBOUNCE)',
    followUpValues: 'constant expressions over constant column names and NULL, from JOB_COLUMNS (sql/enqueue.sql.ts ENQUEUE_DEBOUNCE)',
    order: 'dashboard bounded scan: one of two constant orderings',
    "where.join(' AND ')": 'dashboard fingerprint listing: fixed predicates with $n placeholders, values passed as parameters',
    LIST_COLUMNS: 'a constant column list (dashboard)',
    BULK_BATCH: 'dashboard bulk actions: a constant query of fixed predicates over $n placeholders',
    SCANNED_COLUMNS: 'a constant column list (dashboard, bounded scan)',
    "matched.join(' AND ')": 'dashboard bounded scan: fixed predicates with $n placeholders, values passed as parameters',
    after: 'dashboard bounded scan: a fixed keyset predicate with $n placeholders, or nothing',
    'values.length - 1': 'a placeholder number',
    ELIGIBLE: 'a constant predicate (dashboard dead letters)',
    POLICY_COLUMNS: 'a constant column list (sql/control.sql.ts)',
    "where.length ? where.join(' AND ') : 'true'": 'dashboard filters: fixed predicates with $n placeholders, values passed as parameters',
    select: 'the dashboard query above, itself built only of constants and placeholders',
    'values.length': 'a placeholder number',
    'quoteIdent(options.schema)': 'an identifier, quoted',
    'quoteIdent(schema)': 'an identifier, quoted',
    'quoteIdent(channel)': "a channel name, quoted (sql/notifications.sql.ts listenTo and unlistenFrom: the schema's channels)",
    schema: '@stampeded/testing drain: db.quotedSchema(), quoted',
    name: '@stampeded/testing test databases: a random hex name made there',
  };

  it('every interpolation into SQL text in libs/*/src and apps/*/src is a reviewed constant or a quoted identifier', () => {
    const roots = ['libs/stampeded/src', 'libs/dashboard/src', 'libs/testing/src', 'apps/cli/src', 'apps/demo/src'];
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir)) {
        const path = join(dir, entry);
        if (statSync(path).isDirectory()) walk(path);
        else if (path.endsWith('.ts') && !path.endsWith('.spec.ts')) files.push(path);
      }
    };
    roots.forEach(walk);
    expect(files.length).toBeGreaterThan(50);
    const keyword = /\b(SELECT|INSERT|UPDATE|DELETE|LISTEN|NOTIFY|CREATE|DROP|ALTER|FROM|WHERE|SET)\b/;
    const unreviewed: string[] = [];
    for (const file of files) {
      for (const literal of readFileSync(file, 'utf8').matchAll(/`(?:[^`\\]|\\.)*`/gs)) {
        if (!keyword.test(literal[0])) continue;
        for (const interpolation of literal[0].matchAll(/\$\{((?:[^{}]|\{[^{}]*\})*)\}/g)) {
          const expression = interpolation[1].trim();
          if (!(expression in REVIEWED)) unreviewed.push(`${file}: \${${expression}}`);
        }
      }
    }
    expect(unreviewed).toEqual([]);
  });

  describe('every entry point, fed injection attempts', () => {
    let db: TestDatabase;
    let app: INestApplicationContext;
    let queue: QueueService;
    let schedules: SchedulesService;
    let sql: pg.Client;
    // Not public: every statement is schema-qualified, the LISTEN channels
    // carry the schema's name, the functions pin their search_path.
    const schema = 'secure_schema';

    beforeAll(async () => {
      db = await testDatabase();
      sql = await sqlClient(db.url);
      await sql.query(`CREATE TABLE public.canary (n int); INSERT INTO public.canary VALUES (1)`);
      await migrate(db.url, { schema });
      app = await bootApp(db.url, {
        providers: [Echo],
        stampeded: { schema, maintenance: { enabled: false } },
        queues: [{ name: 'secure' }],
      });
      queue = app.get(QueueService);
      schedules = app.get(SchedulesService);
    });

    afterAll(async () => {
      await app?.close();
      await sql?.end();
      await db?.drop();
    });

    afterEach(async () => {
      expect((await sql.query(`SELECT n FROM public.canary`)).rows).toEqual([{ n: 1 }]);
    });

    const q = (text: string, values: unknown[] = []) => sql.query(text.replaceAll('$S', `"${schema.replaceAll('"', '""')}"`), values);

    it.each(PAYLOADS)('enqueue stores %s verbatim in every string field, and the job runs', async (payload) => {
      const events = app.get(JobEvents);
      const { id } = await queue.enqueue(
        payload,
        { [payload]: payload },
        {
          queue: 'secure',
          tenantId: payload,
          destination: payload,
          dedup: { scope: payload },
          meta: { [payload]: payload },
        },
      );
      const [row] = (await q(`SELECT task, args, meta, tenant_id, destination FROM $S.stampeded_jobs WHERE id = $1`, [id])).rows;
      expect(row).toEqual({ task: payload, args: { [payload]: payload }, meta: { nestjs: { [payload]: payload } }, tenant_id: payload, destination: payload });
      expect((await queue.getJob(id))?.dedupScope).toBe(payload);
      expect(await queue.enqueue(payload, {}, { queue: 'secure', dedup: { scope: payload } })).toEqual({ id, deduplicated: true });
      // No handler for that task name: it fails visibly and is retried, by name.
      expect((await queue.cancel(id, { queue: 'secure' })).cancelled).toBe(true);
      void events;
    });

    it.each(PAYLOADS)('getJob, cancel, retry and counts take %s as a queue name and find nothing', async (payload) => {
      const { id } = await queue.enqueue(Echo, { n: 1 }, { runAt: new Date(Date.now() + 3_600_000) });
      expect(await queue.getJob(id, { queue: payload })).toBeNull();
      await expect(queue.cancel(id, { queue: payload })).rejects.toThrow(/not found|no job/i);
      await expect(queue.retry(id, { queue: payload })).rejects.toThrow(/not found|no job/i);
      expect(Object.values(await queue.counts(payload)).every((n) => n === 0)).toBe(true);
      await expect(queue.getJob(payload)).rejects.toThrow(/is not a job id/);
      await queue.cancel(id);
    });

    it('refuses a queue name or dead-letter queue with quotes before any SQL', async () => {
      for (const payload of PAYLOADS) {
        await expect(queue.enqueue('echo', {}, { queue: payload })).rejects.toThrow(/queue must be 1 to 48 characters/);
        await expect(queue.enqueue('echo', {}, { deadLetterQueue: payload })).rejects.toThrow(/deadLetterQueue must be 1 to 48 characters/);
      }
    });

    it.each(PAYLOADS)('schedules take %s as key, task and args', async (payload) => {
      await schedules.upsert({ key: payload, task: payload, queue: 'secure', every: '1h', args: { [payload]: payload } });
      const got = await schedules.get(payload);
      expect(got).toMatchObject({ key: payload, task: payload, args: { [payload]: payload } });
      await schedules.pause(payload);
      expect((await schedules.get(payload))?.paused).toBe(true);
      expect(await schedules.remove(payload)).toBe(true);
      expect(await schedules.get(`${payload}'`)).toBeUndefined();
    });

    it('a schema name that needs quoting is refused before anything is created, by migrate() and by the module', async () => {
      for (const hostile of [`we"ird'; DROP TABLE canary; --`, 'MyApp', 'tenant-1', 'x'.repeat(64)]) {
        await expect(migrate(db.url, { schema: hostile })).rejects.toThrow(/is not supported: use a plain lower-case identifier/);
        await expect(bootApp(db.url, { via: 'connection', stampeded: { schema: hostile, worker: { enabled: false } } })).rejects.toThrow(
          /is not supported|1 to 63 characters/,
        );
      }
      expect((await sql.query(`SELECT count(*)::int AS n FROM pg_namespace WHERE nspname IN ('MyApp', 'tenant-1')`)).rows[0].n).toBe(0);
    });

    it('a job enqueued and run in its own schema completes, woken by its quoted LISTEN channel', async () => {
      const { id } = await queue.enqueue(Echo, { hello: PAYLOADS[0] });
      await waitFor(async () => (await queue.getJob(id))?.state === 'completed', 'the job to complete');
      expect(app.get(Echo).seen).toContainEqual({ hello: PAYLOADS[0] });
    });
  });
});

describe('security: least privilege', () => {
  // A migration role that owns the schema, and a runtime role with only the
  // grants below: the same statements as docs/security.md (least privilege).
  let db: TestDatabase;
  let admin: pg.Client;
  const suffix = randomBytes(4).toString('hex');
  const owner = `stampeded_owner_${suffix}`;
  const runtime = `stampeded_app_${suffix}`;
  const urlAs = (role: string) => {
    const url = new URL(db.url);
    url.username = role;
    url.password = 'secret';
    return url.toString();
  };

  beforeAll(async () => {
    db = await testDatabase();
    admin = await sqlClient(db.url);
    await admin.query(`
      CREATE ROLE ${owner} LOGIN PASSWORD 'secret';
      CREATE ROLE ${runtime} LOGIN PASSWORD 'secret';
      CREATE SCHEMA stampeded AUTHORIZATION ${owner};
      REVOKE ALL ON SCHEMA public FROM PUBLIC;
      REVOKE CREATE ON DATABASE "${db.name}" FROM PUBLIC;
      GRANT CREATE ON DATABASE "${db.name}" TO ${owner};
    `);
    // As the owner: the migrations, and the queues' partitions.
    await migrate(urlAs(owner), { schema: 'stampeded' });
    const asOwner = await sqlClient(urlAs(owner));
    await asOwner.query(`SET search_path = stampeded; SELECT stampeded_create_queue('secure')`);
    await asOwner.query(`
      GRANT USAGE ON SCHEMA stampeded TO ${runtime};
      GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA stampeded TO ${runtime};
      GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA stampeded TO ${runtime};
      GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA stampeded TO ${runtime};
      ALTER DEFAULT PRIVILEGES IN SCHEMA stampeded GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ${runtime};
      ALTER DEFAULT PRIVILEGES IN SCHEMA stampeded GRANT USAGE, SELECT ON SEQUENCES TO ${runtime};
    `);
    await asOwner.end();
  });

  afterAll(async () => {
    await admin?.end();
    await db?.drop();
    // Roles belong to the server, not the database: dropped from outside it.
    const server = await sqlClient(process.env.STAMPEDED_TEST_SERVER_URL!);
    await server.query(`DROP ROLE IF EXISTS ${runtime}; DROP ROLE IF EXISTS ${owner}`);
    await server.end();
  });

  it('the runtime role alone enqueues, works, schedules and maintains; it cannot change the schema', async () => {
    const app = await bootApp(urlAs(runtime), {
      via: 'connection',
      providers: [Echo],
      queues: [{ name: 'secure' }],
      stampeded: { schema: 'stampeded', migrations: 'none', maintenance: { leaderCheckIntervalMs: 200 } },
    });
    try {
      const queue = app.get(QueueService);
      const ids = (await queue.enqueueMany(Array.from({ length: 20 }, (_, n) => ({ task: Echo, args: { n } })))).map((r) => r.id);
      // Due in a minute, so that the worker cannot finish it (and free its scope) before the duplicate arrives.
      const dup = await queue.enqueue(Echo, { n: 99 }, { dedup: { scope: 'once' }, delayMs: 60_000 });
      expect((await queue.enqueue(Echo, { n: 99 }, { dedup: { scope: 'once' }, delayMs: 60_000 })).id).toBe(dup.id);
      expect((await queue.cancel(dup.id)).cancelled).toBe(true);
      await waitFor(async () => (await queue.counts('secure')).completed === 20, 'all jobs to complete as the runtime role');
      const later = await queue.enqueue(Echo, {}, { runAt: new Date(Date.now() + 3_600_000) });
      expect((await queue.cancel(later.id)).cancelled).toBe(true);
      expect((await queue.retry(later.id)).retried).toBe(true);
      expect((await queue.getJob(ids[0]))?.state).toBe('completed');

      const schedules = app.get(SchedulesService);
      await schedules.upsert({ key: 'nightly', task: 'echo', cron: '0 3 * * *' });
      expect((await schedules.trigger('nightly')).jobId).toBeTruthy();

      const maintenance = app.get(MaintenanceService);
      await waitFor(() => maintenance.isLeader, 'the runtime role to win the leader lock');
      for (const name of ['reaper', 'expirer', 'pruner', 'partitions', 'health', 'insights'] as MaintenanceTaskName[]) {
        await expect(maintenance.run(name)).resolves.toBeDefined();
      }
    } finally {
      await app.close();
    }

    const asRuntime = await sqlClient(urlAs(runtime));
    try {
      for (const ddl of [
        `DROP TABLE stampeded.stampeded_jobs`,
        `ALTER TABLE stampeded.stampeded_jobs ADD COLUMN x int`,
        `CREATE TABLE stampeded.mine (n int)`,
        `SELECT stampeded.stampeded_create_queue('sneaky')`,
        `TRUNCATE stampeded.stampeded_jobs`,
      ]) {
        await expect(asRuntime.query(ddl)).rejects.toThrow(/permission denied|must be owner/);
      }
    } finally {
      await asRuntime.end();
    }
  });
});
