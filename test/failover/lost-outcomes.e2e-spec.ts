import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { migrate } from '@stampeded/nestjs';
import { startPrimary, startStandby, type StartedPrimary, type Standby } from '../support/standby.js';
import { sqlClient, waitFor } from '../support/test-app.js';
import { WorkerProcess } from '../support/worker-process.js';

// A failover to an asynchronous standby loses the primary's newest commits,
// among them outcomes a worker recorded and claims a worker received.
describe('outcomes and claims lost with a failover to an asynchronous standby', () => {
  let primary: StartedPrimary;
  let standby: Standby;
  let worker: WorkerProcess | undefined;
  const open: pg.Client[] = [];

  beforeAll(async () => {
    primary = await startPrimary();
    standby = await startStandby(primary);
    await migrate(primary.url);
  });

  afterAll(async () => {
    await worker?.stop();
    for (const c of open) await c.end().catch(() => {});
    await standby?.stop();
    await primary?.stop();
  });

  async function connect(url: string): Promise<pg.Client> {
    const c = await sqlClient(url);
    c.on('error', () => {});
    open.push(c);
    return c;
  }

  const insert = (sql: pg.Client, id: string, ms: number, runInMs = 0) =>
    sql.query(
      `INSERT INTO stampeded_jobs (id, queue, task, args, scheduled_at) VALUES ($1, 'failover', 'witnessed', jsonb_build_object('ms', $2::int), now() + $3 * interval '1 millisecond')`,
      [id, ms, runInMs],
    );

  it('runs again a job whose completion was lost, and never twice at once a job whose claim was lost', async () => {
    const hosts = [`127.0.0.1:${primary.port}`, `127.0.0.1:${standby.port}`];
    worker = WorkerProcess.start({
      url: primary.url,
      hosts,
      tasks: 'failover',
      stampeded: { worker: { pollIntervalMs: 200, heartbeatIntervalMs: 1000 }, maintenance: { leaderCheckIntervalMs: 500 } },
    });
    await worker.ready();
    const sql = await connect(primary.url);
    const completion = randomUUID();
    const claim = randomUUID();
    await insert(sql, completion, 1500);
    await insert(sql, claim, 2500, 1500);
    // The first job's claim reaches the standby; its completion, and the
    // second job's claim, are committed on the primary alone.
    await worker.waitFor('run', (e) => e.id === completion && e.phase === 'start');
    await standby.caughtUp();
    await standby.pauseStreaming();
    const rerunFrom = worker.events.length;
    await worker.waitFor('completed', (e) => e.id === completion);
    await worker.waitFor('run', (e) => e.id === claim && e.phase === 'start');
    await primary.kill('SIGKILL');
    await standby.promote();

    const promoted = await connect(standby.url);
    const stateOf = async (id: string) => (await promoted.query<{ state: string }>('SELECT state FROM stampeded_jobs WHERE id = $1', [id])).rows[0]?.state;
    await waitFor(
      async () => (await stateOf(completion)) === 'completed' && (await stateOf(claim)) === 'completed',
      'both jobs to complete on the new primary',
      30_000,
    ).catch(async (err: Error) => {
      const { rows } = await promoted.query('SELECT id, state, attempt, claimed_by FROM stampeded_jobs');
      throw new Error(`${err.message}\njobs: ${JSON.stringify(rows)}\nworker: ${JSON.stringify(worker!.events.slice(1))}\n${worker!.output}`);
    });
    const ends = (id: string) => worker!.events.filter((e) => e.event === 'run' && e.phase === 'end' && e.id === id).length;
    // The completed job ran again: its completion was lost.
    expect(ends(completion)).toBe(2);
    expect(worker.events.slice(rerunFrom).filter((e) => e.event === 'completed' && e.id === completion).length).toBe(2);
    // The job whose claim was lost: once the worker reached the new primary
    // it found the claim gone and stopped the run (its signal fired), then
    // claimed the job again and ran it to its end; or it claimed the job
    // again first, and the run under way stood for that claim. One
    // completion, and never two runs at once.
    const runs = worker.events.filter((e) => e.event === 'run' && e.id === claim);
    const phases = runs.map((e) => (e.phase === 'end' && e.aborted ? 'stopped' : e.phase));
    expect([
      ['start', 'end'],
      ['start', 'stopped', 'start', 'end'],
    ]).toContainEqual(phases);
    expect(worker.events.filter((e) => e.event === 'completed' && e.id === claim).length).toBe(1);
  });
});
