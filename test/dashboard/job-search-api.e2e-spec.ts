import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type pg from 'pg';
import { QueueService, StampededModule, Task, type TaskHandler } from '@stampeded/nestjs';
import { StampededDashboardModule } from '@stampeded/dashboard';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase, waitFor } from '../support/test-app.js';

// The JSON API and the HTML of what the browser suites look at (they skip
// where Chromium is not installed; this does not): a job's history, the
// searches, the jobs list's times, a finished job's missing result, and the
// health page's vacuum standing.

const BASIC = `Basic ${Buffer.from('ops:api').toString('base64')}`;
const tries = new Map<string, number>();

@Task('wobbly', { queue: 'api', maxAttempts: 3, backoff: { baseMs: 100, maxMs: 200 } })
class Wobbly implements TaskHandler<{ key: string }> {
  async handle(args: { key: string }) {
    const n = (tries.get(args.key) ?? 0) + 1;
    tries.set(args.key, n);
    if (n < 3) throw new Error(`gateway timeout ${n}`);
  }
}

describe('dashboard API: what happened to a job, and finding jobs', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  let app: INestApplication;
  let base: string;

  beforeAll(async () => {
    db = await testDatabase();
    @Module({
      imports: [
        StampededModule.forRoot({ connection: { url: db.url }, migrations: 'auto', worker: { pollIntervalMs: 50 } }),
        StampededDashboardModule.forRoot({ path: '/stampeded', auth: { username: 'ops', password: 'api' }, refreshSeconds: 0 }),
      ],
      providers: [Wobbly],
    })
    class ApiModule {}
    app = await NestFactory.create(ApiModule, { logger: ['error'] });
    await app.listen(0, '127.0.0.1');
    base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await app?.close();
    await sql?.end();
    await db?.drop();
  });

  const get = (path: string) => fetch(`${base}/stampeded${path}`, { headers: { authorization: BASIC } });
  const json = async (path: string) => {
    const response = await get(path);
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };
  const stateOf = async (id: string) => (await sql.query(`SELECT state FROM stampeded_jobs WHERE id = $1`, [id])).rows[0]?.state;

  it("answers a job's attempts, each with the worker, start and error its row keeps", async () => {
    const { id } = await app.get(QueueService).enqueue('wobbly', { key: 'x' });
    await waitFor(async () => (await stateOf(id)) === 'completed', 'the job to complete on its third attempt');
    const { rows } = await sql.query(`SELECT attempted_by, errors, claimed_at, finished_at FROM stampeded_jobs WHERE id = $1`, [id]);
    const { status, body } = await json(`/api/jobs/${id}/history`);
    expect(status).toBe(200);
    expect(body.job.id).toBe(id);
    expect(body.timeline.spans.map((s: any) => [s.attempt, s.outcome, s.worker, s.error])).toEqual([
      [1, 'failed', rows[0].attempted_by[0], expect.stringContaining('gateway timeout 1')],
      [2, 'failed', rows[0].attempted_by[1], expect.stringContaining('gateway timeout 2')],
      [3, 'completed', rows[0].attempted_by[2], null],
    ]);
    expect(new Date(body.timeline.spans[0].startedAt).getTime()).toBe(new Date(rows[0].errors[0].started_at).getTime());
    expect(body.timeline.spans[2].durationMs).toBe(rows[0].finished_at.getTime() - rows[0].claimed_at.getTime());
    expect(body.related).toEqual({ source: null, deadLetter: null, workflow: null, ordering: null, dedup: null });
    expect((await get(`/api/jobs/01a2372e-0000-7000-8000-000000000000/history`)).status).toBe(404);
    expect((await get(`/api/jobs/nope/history`)).status).toBe(400);

    // The page draws them, and lists the job as when it finished and how long it ran.
    const html = await (await get(`/jobs/${id}?queue=api`)).text();
    expect(html).toContain('<h2 id="attempts-heading">Attempts</h2>');
    expect(html.match(/<rect /g)).toHaveLength(3);
    const list = await (await get(`/jobs?queue=api`)).text();
    expect(list).toContain(`<time datetime="${rows[0].finished_at.toISOString()}"`);
    expect(list).toMatch(/<\/time>, ran \d+(\.\d)? (ms|s)/);
  });

  it('says a discarded job will never have a result, and links its dead letter', async () => {
    tries.set('y', -100);
    const { id } = await app.get(QueueService).enqueue('wobbly', { key: 'y' }, { maxAttempts: 1, deadLetterQueue: 'api-dead' });
    await waitFor(async () => (await stateOf(id)) === 'discarded', 'the job to be discarded');
    const html = await (await get(`/jobs/${id}?queue=api`)).text();
    expect(html).not.toContain('none yet');
    expect(html).toContain('none: the job was discarded without completing');
    const { body } = await json(`/api/jobs/${id}/history?queue=api`);
    const { rows } = await sql.query(`SELECT id::text FROM stampeded_jobs WHERE source_id = $1`, [id]);
    expect(body.related.deadLetter).toEqual({ queue: 'api-dead', copy: { id: rows[0].id, queue: 'api-dead', state: 'available' } });
    const copy = await json(`/api/jobs/${rows[0].id}/history`);
    expect(copy.body.related.source).toEqual({ id, queue: 'api', attempts: 1 });
  });

  it('finds jobs by args, meta, id tail and fingerprint, and says what to type for a bad search', async () => {
    const queue = app.get(QueueService);
    const later = { delayMs: 3_600_000 };
    const a = await queue.enqueue('wobbly', { key: 'a', orderId: 42 }, later);
    const b = await queue.enqueue('wobbly', { key: 'b', orderId: 420 }, later);
    const ids = (body: Record<string, any>) => body.jobs.map((j: { id: string }) => j.id);
    const byArgs = await json(`/api/jobs?args=${encodeURIComponent('{"orderId": 42}')}`);
    expect(ids(byArgs.body)).toEqual([a.id]);
    expect(byArgs.body.scan).toEqual({ budget: 20_000, ranOut: false });
    expect(ids((await json(`/api/jobs?queue=api&id=${b.id.slice(-6)}`)).body)).toEqual([b.id]);
    expect(ids((await json(`/api/jobs?id=${a.id}`)).body)).toEqual([a.id]);
    await sql.query(`UPDATE stampeded_jobs SET meta = '{"activejob": {"locale": "fr"}}' WHERE id = $1`, [b.id]);
    expect(ids((await json(`/api/jobs?meta=${encodeURIComponent('{"activejob": {"locale": "fr"}}')}`)).body)).toEqual([b.id]);

    const [{ fp }] = (await sql.query(`SELECT encode(error_fingerprint, 'hex') AS fp FROM stampeded_jobs WHERE queue = 'api' AND state = 'discarded'`)).rows;
    const byFingerprint = await json(`/api/jobs?fingerprint=${fp.slice(0, 10)}`);
    expect(byFingerprint.body.jobs).toHaveLength(1);
    expect(byFingerprint.body.jobs[0].state).toBe('discarded');

    for (const [query, says] of [
      ['args=%5B42%5D', 'args must be a JSON object'],
      ['meta=%7Bnope', 'meta must be a JSON object'],
      ['id=xyz', "id must be a job's id (a UUID) or its last characters"],
      ['fingerprint=12', "fingerprint must be an error fingerprint's first 8 to 64 hex digits"],
    ]) {
      const bad = await json(`/api/jobs?${query}`);
      expect(bad.status).toBe(400);
      expect(bad.body.message).toContain(says);
      const page = await get(`/jobs?${query}`);
      expect(page.status).toBe(400);
      expect(await page.text()).toContain('role="alert"');
    }
  });

  it("answers each table's vacuum standing, and marks red on the page only a table autovacuum does not reach", async () => {
    await sql.query(`SELECT stampeded_create_queue('api_off')`);
    await sql.query(`ALTER TABLE stampeded_jobs_api_off SET (autovacuum_enabled = false)`);
    await sql.query(`INSERT INTO stampeded_jobs_api_off (queue, task) SELECT 'api_off', 'x' FROM generate_series(1, 400)`);
    await sql.query(`DELETE FROM stampeded_jobs_api_off`);
    await sql.query(`DO $$ BEGIN IF to_regproc('pg_stat_force_next_flush') IS NOT NULL THEN PERFORM pg_stat_force_next_flush(); END IF; END $$`);
    const off = await waitFor(async () => {
      await sql.query('SELECT 1');
      const { body } = await json('/api/health');
      return body.vacuum.find((v: any) => v.relname === 'stampeded_jobs_api_off' && v.needs_vacuum);
    }, 'the dead tuples in the statistics');
    expect(off).toMatchObject({ standing: 'off', autovacuum_enabled: false });
    const { body } = await json('/api/health');
    for (const v of body.vacuum) expect(['clean', 'due', 'overdue', 'off']).toContain(v.standing);
    const html = await (await get('/health')).text();
    expect(html).toContain('not vacuumed: autovacuum is off for it');
  });
});
