import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type pg from 'pg';
import { QueueService, SchedulesService, StampededModule, Task, type TaskHandler } from '@stampeded/nestjs';
import { StampededDashboardModule } from '@stampeded/dashboard';
import type { TestDatabase } from '@stampeded/testing';
import { bootApp, sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import { WorkerProcess, type WorkerEvent } from '../support/worker-process.js';
import { cli } from '../support/cli.js';

// The enqueuing app's view of the worker's tasks (test/fixtures/worker-process/encryption.tasks.mjs):
// the same names and options, and no validate option, so that args the worker refuses get through.
@Task('send-secret', { queue: 'secrets', encrypt: true, deadLetterQueue: 'secrets-dead' })
class SendSecret implements TaskHandler<{ marker: string; to?: string; fail?: boolean; amount?: unknown }> {
  handle() {}
}
@Task('collect-secrets', { queue: 'secrets', encrypt: true })
class CollectSecrets implements TaskHandler<{ marker: string }> {
  handle() {}
}
@Task('isolated-secret', { queue: 'secrets', encrypt: true })
class IsolatedSecret implements TaskHandler<{ marker: string }> {
  handle() {}
}
@Task('hold-secret', { queue: 'held', encrypt: true })
class HoldSecret implements TaskHandler<{ marker: string }> {
  handle() {}
}
@Task('plain-note', { queue: 'secrets' })
class PlainNote implements TaskHandler<{ marker: string }> {
  handle() {}
}
const TASKS = [SendSecret, CollectSecrets, IsolatedSecret, HoldSecret, PlainNote];

const key = () => randomBytes(32).toString('base64');
const K1 = key();
const K2 = key();
const K3 = key();
/** After the rotation's deploy: k2 encrypts, k1 still opens what it encrypted. */
const ROTATED = { keys: { k2: K2, k1: K1 }, current: 'k2' };

/** Unique per value, with a "-" that base64 never writes: found in a row's text only if the plaintext is there. */
const marker = (n: number | string) => `SECRET-${n}-ada@example.com`;
const kidOf = (value: any): string | undefined => value?.['$stampeded:enc']?.kid;

describe('encrypted args and results', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  /** The API process: enqueues with k1 only, serves the dashboard, runs no jobs. */
  let api: INestApplication;
  let base: string;
  let queue: QueueService;
  let workers: WorkerProcess[] = [];
  const scratch = mkdtempSync(join(tmpdir(), 'stampeded-encryption-'));
  const releaseFile = join(scratch, 'release');
  const ids: Record<string, string> = {};

  /** Every row of the table, as its text: each column, args, result, errors and all. */
  const rowsText = async (table: string) => (await sql.query(`SELECT t::text AS row FROM ${table} t`)).rows.map((r) => r.row as string).join('\n');
  const handled = () => workers.flatMap((w) => w.events.filter((e) => e.event === 'handled'));
  const job = async (id: string) => (await sql.query(`SELECT * FROM stampeded_jobs WHERE id = $1`, [id])).rows[0];

  beforeAll(async () => {
    db = await testDatabase();
    sql = await sqlClient(db.url);
    @Module({
      imports: [
        StampededModule.forRoot({
          connection: { url: db.url },
          migrations: 'auto',
          worker: { enabled: false },
          encryption: { keys: { k1: Buffer.from(K1, 'base64') }, current: 'k1' },
        }),
        StampededModule.registerQueue({ name: 'vault', encrypt: true }),
        StampededDashboardModule.forRoot({ path: '/stampeded', auth: () => true, refreshSeconds: 0 }),
      ],
      providers: TASKS,
    })
    class ApiModule {}
    api = await NestFactory.create(ApiModule, { logger: ['error', 'warn'] });
    await api.listen(0, '127.0.0.1');
    base = (await api.getUrl()).replace('[::1]', '127.0.0.1');
    queue = api.get(QueueService);
  });

  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await api?.close();
    await sql?.end();
    await db?.drop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('stores no plaintext of an encrypted task in jobs, dead letters or schedules; two worker processes with the keys run each job once on its plaintext', async () => {
    ids.one = (await queue.enqueue('send-secret', { marker: marker(1), to: 'ada@example.com' })).id;
    const many = await queue.enqueueMany([2, 3, 4, 5, 6].map((n) => ({ task: SendSecret, args: { marker: marker(n) } })));
    ids.fails = (await queue.enqueue(SendSecret, { marker: marker(7), fail: true })).id;
    // The worker's validate option refuses it, and its issue would quote the value.
    ids.invalid = (await queue.enqueue(SendSecret, { marker: marker(8), amount: marker('8-amount') })).id;
    const flow = await queue.enqueueFlow({
      task: 'collect-secrets',
      args: { marker: marker(9) },
      children: [
        { task: 'send-secret', args: { marker: marker(10) } },
        { task: 'isolated-secret', args: { marker: marker(11) } },
      ],
    });
    ids.collect = flow.jobs['0'];
    // Encrypted by its queue: this app does not know the task at all.
    ids.vault = (await queue.enqueue('vault-note', { marker: marker(12) }, { queue: 'vault' })).id;
    const schedules = api.get(SchedulesService);
    const schedule = await schedules.upsert({ key: 'secret-nightly', task: 'send-secret', cron: '0 3 * * *', args: { marker: marker(13) } });
    expect(schedule.args).toEqual({ marker: marker(13) });
    ids.fired = (await schedules.trigger('secret-nightly')).jobId;
    // The dedup scope is not encrypted, and dedup works on it.
    const first = await queue.enqueue(SendSecret, { marker: marker(14) }, { dedup: { scope: 'welcome:42' } });
    const twin = await queue.enqueue(SendSecret, { marker: marker('14-twin') }, { dedup: { scope: 'welcome:42' } });
    expect(twin).toEqual({ id: first.id, deduplicated: true });
    await queue.enqueue(PlainNote, { marker: 'PLAIN-VISIBLE-1' });

    // Before any worker: the plain task's args are there to be found, the encrypted ones are not.
    let jobsText = await rowsText('stampeded_jobs');
    expect(jobsText).toContain('PLAIN-VISIBLE-1');
    expect(jobsText).not.toContain('SECRET-');
    expect(await rowsText('stampeded_schedules')).not.toContain('SECRET-');
    const sealed = await sql.query(`SELECT task, args FROM stampeded_jobs WHERE task <> 'plain-note'`);
    expect(sealed.rows.map((r) => kidOf(r.args))).toEqual(sealed.rows.map(() => 'k1'));

    // Two processes of the fleet, each given the keys: one runs the secrets queue, the other the vault and held queues.
    const config = { url: db.url, tasks: 'encryption' as const, releaseFile, queues: [{ name: 'vault', encrypt: true }] };
    const worker = (queues: string[]) => ({ encryption: ROTATED, worker: { queues, concurrency: 4, pollIntervalMs: 100 } });
    workers = [WorkerProcess.start({ ...config, stampeded: worker(['secrets']) }), WorkerProcess.start({ ...config, stampeded: worker(['vault', 'held']) })];
    await Promise.all(workers.map((w) => w.ready()));
    await waitFor(
      async () =>
        (await sql.query(`SELECT 1 FROM stampeded_jobs WHERE queue IN ('secrets', 'vault') AND state NOT IN ('completed', 'discarded')`)).rowCount === 0,
      'every job of the secrets and vault queues finished',
      60_000,
    );

    // Each ran once, on the plaintext it was enqueued with.
    const runs = handled();
    const byMarker = new Map<string, WorkerEvent[]>();
    for (const run of runs) byMarker.set((run.args as { marker: string }).marker, [...(byMarker.get((run.args as { marker: string }).marker) ?? []), run]);
    const expected = [1, 2, 3, 4, 5, 6, 7, 9, 10, 12, 13, 14].map(marker);
    expect([...byMarker.keys()].sort()).toEqual([...expected, 'PLAIN-VISIBLE-1'].sort());
    for (const [, seen] of byMarker) expect(seen).toHaveLength(1);
    expect(byMarker.get(marker(1))![0].args).toEqual({ marker: marker(1), to: 'ada@example.com' });
    // Both processes ran jobs, each opening args that a process without the keys could not.
    expect(byMarker.get(marker(12))![0].pid).toBe(workers[1].pid);
    expect(byMarker.get(marker(1))![0].pid).toBe(workers[0].pid);
    // The flow's parent read its children's stored results, opened, the isolated child's too.
    const collect = byMarker.get(marker(9))![0];
    expect(
      Object.values(collect.children as object)
        .map((c: any) => c.echoed)
        .sort(),
    ).toEqual([marker(10), marker(11)].sort());

    jobsText = await rowsText('stampeded_jobs');
    expect(jobsText).not.toContain('SECRET-');
    expect(await rowsText('stampeded_schedules')).not.toContain('SECRET-');

    // Args under k1, as enqueued; results under the workers' current key.
    const done = await job(ids.one);
    expect(done).toMatchObject({ state: 'completed' });
    expect([kidOf(done.args), kidOf(done.result)]).toEqual(['k1', 'k2']);
    expect(kidOf((await job(ids.vault)).result)).toBe('k2');
    for (const m of many) expect(kidOf((await job(m.id)).result)).toBe('k2');
    // The dead-letter copy is the sealed args, as they were.
    const [dead] = (await sql.query(`SELECT * FROM stampeded_jobs WHERE queue = 'secrets-dead' AND source_id = $1`, [ids.fails])).rows;
    expect(kidOf(dead.args)).toBe('k1');
    // Redriven, the copies (this one, and the job its validate option refused) go back as they were stored,
    // run on their plaintext again, and are dead-lettered again as they were.
    const deadArgs = async () => (await sql.query(`SELECT args FROM stampeded_jobs WHERE queue = 'secrets-dead' ORDER BY source_id`)).rows.map((r) => r.args);
    const copies = await deadArgs();
    expect(copies.map(kidOf)).toEqual(['k1', 'k1']);
    expect((await queue.redrive('secrets-dead')).moved).toBe(2);
    await waitFor(() => handled().filter((e) => (e.args as { marker: string }).marker === marker(7)).length === 2, 'the redriven job run again');
    await waitFor(async () => (await deadArgs()).length === 2, 'both dead-lettered again');
    expect(await deadArgs()).toEqual(expect.arrayContaining(copies));
    expect(await rowsText('stampeded_jobs')).not.toContain('SECRET-');
    // A refusal by the validate option says how many issues, not what they quote.
    const invalid = await job(ids.invalid);
    expect(invalid).toMatchObject({ state: 'discarded', failure_kind: 'unrecoverable' });
    expect(invalid.last_error).toMatch(/fail its validate option \(1 issue\(s\), not recorded here because the task's args are encrypted/);

    // The API process opens the args it can (k1), and leaves the result it cannot (k2) as stored.
    const seen = await queue.getJob(SendSecret, ids.one);
    expect(seen?.args).toEqual({ marker: marker(1), to: 'ada@example.com' });
    expect(kidOf(seen?.result)).toBe('k2');
    // A process with both keys reads both, by getJob and by waitFor.
    const reader = await bootApp(db.url, { via: 'connection', stampeded: { worker: { enabled: false }, encryption: ROTATED } });
    try {
      const read = reader.get(QueueService);
      expect(await read.getJob(ids.one)).toMatchObject({ args: { marker: marker(1), to: 'ada@example.com' }, result: { echoed: marker(1) } });
      expect((await read.waitFor(ids.collect, { timeoutMs: 10_000 })).result).toMatchObject({ children: expect.any(Object) });
      expect((await read.getJob(ids.fired))?.args).toEqual({ marker: marker(13) });
      expect((await reader.get(SchedulesService).get('secret-nightly'))?.args).toEqual({ marker: marker(13) });
    } finally {
      await reader.close();
    }
  });

  it('discards a job whose key no worker holds as unrecoverable, naming the key, without running it', async () => {
    const other = await bootApp(db.url, {
      via: 'connection',
      providers: [SendSecret],
      stampeded: { worker: { enabled: false }, encryption: { keys: { k3: K3 }, current: 'k3' } },
    });
    try {
      ids.k3 = (await other.get(QueueService).enqueue(SendSecret, { marker: marker('k3') })).id;
    } finally {
      await other.close();
    }
    const row = await waitFor(async () => {
      const r = await job(ids.k3);
      return r.state === 'discarded' ? r : null;
    }, 'the job under k3 discarded');
    expect(row.failure_kind).toBe('unrecoverable');
    expect(row.attempt).toBe(1);
    expect(row.last_error).toMatch(/encrypted with key "k3", which is not among this process's keys \(k2, k1\)/);
    expect(handled().some((e) => (e.args as { marker: string }).marker === marker('k3'))).toBe(false);
    expect(await rowsText('stampeded_jobs')).not.toContain('SECRET-');
  });

  it('`stampeded encryption rotate` re-encrypts old jobs and schedules with the current key, in batches, and leaves a running job alone', async () => {
    ids.held = (await queue.enqueue(HoldSecret, { marker: marker('held') })).id;
    await Promise.race(workers.map((w) => w.waitFor('held', (e) => e.id === ids.held)));
    const keysEnv = { STAMPEDED_ENCRYPTION_KEYS: JSON.stringify(ROTATED) };

    const dry = await cli(db.url, ['encryption', 'rotate', '--dry-run', '--json'], keysEnv);
    expect(dry.code).toBe(0);
    const before = await sql.query(`SELECT id, args, result FROM stampeded_jobs`);

    const run = await cli(db.url, ['encryption', 'rotate', '--batch-size', '3', '--json'], keysEnv);
    expect(run.code).toBe(0);
    const result = run.json();
    expect(result).toMatchObject({ current: 'k2', running: 1, unreadable: { k3: 2 }, schedules: 1, dryRun: false });
    expect(dry.json()).toMatchObject({ ...result, dryRun: true });
    // Every job sealed under k1 (args or result) before, dead letters included, but the held one.
    const underK1 = before.rows.filter((r) => r.id !== ids.held && (kidOf(r.args) === 'k1' || kidOf(r.result) === 'k1'));
    expect(result.jobs).toBe(underK1.length);

    const kids = async () =>
      (await sql.query(`SELECT id, args, result FROM stampeded_jobs WHERE task <> 'plain-note'`)).rows.flatMap((r) =>
        [kidOf(r.args), kidOf(r.result)]
          .filter(Boolean)
          .map((kid) => `${r.id === ids.held ? 'held' : r.id === ids.k3 || kidOf(r.args) === 'k3' ? 'k3' : 'job'}:${kid}`),
      );
    expect(new Set(await kids())).toEqual(new Set(['job:k2', 'held:k1', 'k3:k3']));
    expect(kidOf((await sql.query(`SELECT args FROM stampeded_schedules WHERE key = 'secret-nightly'`)).rows[0].args)).toBe('k2');
    expect(await rowsText('stampeded_jobs')).not.toContain('SECRET-');

    // Once the held job finishes, a second run takes it too.
    writeFileSync(releaseFile, '');
    await waitFor(async () => (await job(ids.held)).state === 'completed', 'the held job completed');
    const again = await cli(db.url, ['encryption', 'rotate', '--json'], keysEnv);
    expect(again.json()).toMatchObject({ jobs: 1, running: 0, schedules: 0 });
    expect(new Set(await kids())).toEqual(new Set(['job:k2', 'held:k2', 'k3:k3']));

    // k1 is no longer needed: a process with k2 alone reads what k1 once sealed.
    const k2Only = await bootApp(db.url, { via: 'connection', stampeded: { worker: { enabled: false }, encryption: { keys: { k2: K2 }, current: 'k2' } } });
    try {
      const read = k2Only.get(QueueService);
      expect(await read.getJob(ids.one)).toMatchObject({ args: { marker: marker(1) }, result: { echoed: marker(1) } });
      expect((await read.getJob(ids.held))?.args).toEqual({ marker: marker('held') });
    } finally {
      await k2Only.close();
    }

    // Without keys the command refuses, before it connects.
    const none = await cli(db.url, ['encryption', 'rotate']);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/needs the keys: pass --keys-file <path>, or set STAMPEDED_ENCRYPTION_KEYS/);
    const keysFile = join(scratch, 'keys.json');
    writeFileSync(keysFile, JSON.stringify({ keys: { k2: 'short' }, current: 'k2' }));
    const bad = await cli(db.url, ['encryption', 'rotate', '--keys-file', keysFile]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/key "k2" is not base64 text/);
  });

  it('the dashboard and `stampeded jobs show` say "encrypted" and the key, never the ciphertext', async () => {
    const stored = await job(ids.one);
    const ciphertext = stored.args['$stampeded:enc'].ct as string;
    const kid = kidOf(stored.args);
    const page = await (await fetch(`${base}/stampeded/jobs/${ids.one}`)).text();
    expect(page).toContain(`encrypted · key ${kid}`);
    expect(page).not.toContain(ciphertext);
    expect(page).not.toContain(stored.result['$stampeded:enc'].ct);
    const list = await (await fetch(`${base}/stampeded/jobs?queue=secrets`)).text();
    expect(list.match(/encrypted · key k\d/g)?.length).toBeGreaterThan(5);
    expect(list).not.toMatch(/plain-note <span class="tag encrypted">/);
    expect(list).not.toContain(ciphertext);

    const shown = await cli(db.url, ['jobs', 'show', ids.one]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(new RegExp(`^args: +encrypted \\(key ${kid}; readable only in a process that holds the key\\)$`, 'm'));
    expect(shown.stdout).toMatch(/^result: +encrypted \(key k2;/m);
    expect(shown.stdout).not.toContain(ciphertext);
  });

  it('refuses to start a task or queue that encrypts without keys, and keys that are not 32 bytes', async () => {
    await expect(bootApp(db.url, { providers: [SendSecret], stampeded: { worker: { enabled: false } } })).rejects.toThrow(
      /@Task\('send-secret'\) on SendSecret has encrypt: true, but StampededModule.forRoot\(\) has no encryption keys/,
    );
    await expect(bootApp(db.url, { queues: [{ name: 'vault', encrypt: true }], stampeded: { worker: { enabled: false } } })).rejects.toThrow(
      /registerQueue\("vault"\) has encrypt: true/,
    );
    await expect(
      bootApp(db.url, { stampeded: { worker: { enabled: false }, encryption: { keys: { k1: randomBytes(16).toString('base64') }, current: 'k1' } } }),
    ).rejects.toThrow(/encryption key "k1" is 16 bytes once decoded; AES-256 needs 32/);
  });
});
