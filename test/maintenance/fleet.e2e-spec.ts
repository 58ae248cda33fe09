import type pg from 'pg';
import { migrate } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase, waitFor } from '../support/test-app.js';
import { WorkerProcess, type WorkerProcessConfig } from '../support/worker-process.js';

// Separate processes, killed with SIGKILL: what a crash, an OOM kill or a
// pulled plug does to a Stampeded fleet.
describe('maintenance across processes', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  const fleet: WorkerProcess[] = [];

  beforeAll(async () => {
    db = await testDatabase();
    await migrate(db.url);
    sql = await sqlClient(db.url);
  });

  afterEach(async () => {
    await Promise.all(fleet.splice(0).map((p) => p.stop()));
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  function start(config: Pick<WorkerProcessConfig, 'stampeded' | 'hang'>): WorkerProcess {
    const process = WorkerProcess.start({ url: db.url, tasks: 'fleet', ...config, stampeded: { migrations: 'auto', ...config.stampeded } });
    fleet.push(process);
    return process;
  }

  it('hands maintenance leadership over when the leader process is killed', async () => {
    const stampeded = { worker: { enabled: false }, maintenance: { leaderCheckIntervalMs: 250 } };
    const first = start({ stampeded });
    await first.waitFor('elected');
    const second = start({ stampeded });
    await second.ready();
    expect(second.has('elected')).toBe(false);

    const killedAt = Date.now();
    await first.kill();
    await second.waitFor('elected');
    const handOverMs = Date.now() - killedAt;

    // One holder of the lock, and it is the survivor's leader connection.
    const { rows } = await sql.query(
      `SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database()`,
    );
    expect(rows).toEqual([{ application_name: 'stampeded-leader' }]);
    process.stderr.write(`maintenance hand-over after SIGKILL of the leader: ${handOverMs} ms\n`);
  }, 180_000);

  it('reaps the job of a worker process killed mid-job; another process reruns it', async () => {
    const worker = { heartbeatIntervalMs: 200, pollIntervalMs: 100 };
    const doomed = start({ hang: true, stampeded: { worker, maintenance: { enabled: false } } });
    await doomed.ready();
    const { rows } = await sql.query(`INSERT INTO stampeded_jobs (queue, task, args) VALUES ('fleet', 'slow', '{}') RETURNING id::text`);
    const id: string = rows[0].id;
    await doomed.waitFor('started', (e) => e.id === id);
    const [{ claimed_by: doomedWorker }] = (await sql.query(`SELECT claimed_by::text FROM stampeded_jobs WHERE id = $1`, [id])).rows;

    const rescuer = start({
      stampeded: { worker, maintenance: { leaderCheckIntervalMs: 200, reapIntervalMs: 250, reapDeadAfter: 1000 } },
    });
    await rescuer.waitFor('elected');
    await doomed.kill();

    await rescuer.waitFor('reaped', (e) => (e.jobs as { id: string }[]).some((j) => j.id === id));
    await rescuer.waitFor('completed', (e) => e.id === id);
    const [job] = (await sql.query(`SELECT state, failure_kind, interruptions, attempt, attempted_by FROM stampeded_jobs WHERE id = $1`, [id])).rows;
    expect(job).toMatchObject({ state: 'completed', failure_kind: 'worker_missing', interruptions: 1, attempt: 2 });
    expect(job.attempted_by).toHaveLength(2);
    expect(job.attempted_by[0]).toBe(doomedWorker);
    expect(job.attempted_by[1]).not.toBe(doomedWorker);
    await waitFor(
      async () => (await sql.query(`SELECT count(*)::int AS n FROM stampeded_workers WHERE id = $1`, [doomedWorker])).rows[0].n === 0,
      "the dead worker's row to be removed",
    );
  }, 180_000);
});
