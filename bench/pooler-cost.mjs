// What the transaction-mode pooler mode costs the database, statement by
// statement, on a direct connection (the pooler's own hop is the network's):
//
//   - an empty claim: what a worker that cannot LISTEN runs per queue at
//     every poll (POLL_ONLY_INTERVAL_MS, 500 ms by default) while idle;
//   - the same statement unnamed (parsed and planned every time, as behind
//     PgBouncer 1.18) against named (prepared once per connection);
//   - a claim and a completion of batches of 100 no-op jobs, named and unnamed.
//
//   node bench/pooler-cost.mjs [--runs 5000]
//
// Prints the mean time of each as the client sees it, and the
// backend's CPU for each (from /proc, when the server runs here).
// PostgreSQL: DATABASE_URL when set, otherwise one started for the run.
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { startPostgres, createTestDatabase } from '@stampeded/testing';
import { migrate } from '@stampeded/nestjs';
import { CLAIM_BATCH, COMPLETE_MANY } from '@stampeded/nestjs/internal';

const args = process.argv.slice(2);
const RUNS = Number(args[args.indexOf('--runs') + 1] || 5000) || 5000;

const server = await startPostgres();
const db = await createTestDatabase(server.url, 'pooler_cost');
const client = new pg.Client({ connectionString: db.url });
await client.connect();

/** The backend's CPU time so far (ms), or NaN where /proc cannot tell. */
async function backendCpuMs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return NaN;
  }
}

async function measure(label, runs, statement) {
  const [{ pid }] = (await client.query('SELECT pg_backend_pid() AS pid')).rows;
  const cpu0 = await backendCpuMs(pid);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < runs; i++) await statement(i);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const cpu = (await backendCpuMs(pid)) - cpu0;
  console.log(`${label.padEnd(44)} ${(ms / runs).toFixed(3)} ms each, backend CPU ${Number.isNaN(cpu) ? 'n/a' : (cpu / runs).toFixed(3)} ms each`);
}

try {
  await migrate(db.url);
  await client.query(`SELECT stampeded_create_queue('bench')`);
  const [{ id: worker }] = (await client.query(`INSERT INTO stampeded_workers (hostname, pid) VALUES ('bench', 1) RETURNING id::text`)).rows;
  const claim = [`bench`, worker, 100, null, null];
  const named = (s, values) => client.query({ name: s.name, text: s.text, values });
  const unnamed = (s, values) => client.query({ text: s.text, values });

  for (let warm = 0; warm < 200; warm++) await named(CLAIM_BATCH, claim);
  await measure('empty claim, named', RUNS, () => named(CLAIM_BATCH, claim));
  await measure('empty claim, unnamed', RUNS, () => unnamed(CLAIM_BATCH, claim));

  const batches = Math.max(10, Math.floor(RUNS / 50));
  for (const [label, run] of [
    ['claim + complete of 100 jobs, named', named],
    ['claim + complete of 100 jobs, unnamed', unnamed],
  ]) {
    await client.query(`INSERT INTO stampeded_jobs (queue, task) SELECT 'bench', 'noop' FROM generate_series(1, $1)`, [batches * 100]);
    await measure(label, batches, async () => {
      const { rows } = await run(CLAIM_BATCH, claim);
      await run(COMPLETE_MANY, [worker, rows.map((r) => r.queue), rows.map((r) => r.id), rows.map((r) => r.attempt), null]);
    });
  }
} finally {
  await client.end();
  await db.drop();
  await server.stop();
}
