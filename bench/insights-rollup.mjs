// Times the insights rollup alone: a table of finished jobs (100,000 by
// default, the data of dashboard-queries.mjs, with failed attempts in the
// discarded jobs' errors) rolled up whole in batches of 10,000, in a
// transaction rolled back after each run, so that every run reads the same
// jobs. Prints each run's milliseconds per 1,000 jobs.
//
// `--against FILE` installs another definition of stampeded_rollup_insights
// (a checkout's copy of the function file) beside the built one, runs the two
// alternately and checks that both leave the same rows.
//
// Not a test: `npm run build && node bench/insights-rollup.mjs [jobs] [--runs N] [--against FILE]`.
// Uses DATABASE_URL when set, otherwise starts an embedded PostgreSQL 18.
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { startPostgres, createTestDatabase } from '@stampeded/testing';
import { migrate } from '@stampeded/nestjs';
import { ROLLUP_INSIGHTS } from '../libs/stampeded/dist/sql/maintenance.sql.js';
import { INSIGHTS_HISTOGRAM } from '../libs/stampeded/dist/maintenance/insights-histogram.js';
import { INSIGHTS_TOP_KEYS } from '../libs/stampeded/dist/maintenance/insights-rollup.js';

const args = process.argv.slice(2);
const option = (name) => {
  const at = args.indexOf(name);
  return at < 0 ? undefined : args.splice(at, 2)[1];
};
const against = option('--against');
const runs = Number(option('--runs') ?? 5);
const total = Number(args[0] ?? 100_000);

const server = process.env.DATABASE_URL ? undefined : await startPostgres({ durable: false });
const db = process.env.DATABASE_URL ? { url: process.env.DATABASE_URL } : await createTestDatabase(server.url, 'insights_bench');
const client = new pg.Client({ connectionString: db.url });
try {
  await migrate(db.url);
  await client.connect();
  await client.query(
    `INSERT INTO stampeded_jobs (queue, task, state, tenant_id, destination, finished_at, scheduled_at, claimed_at, errors)
     SELECT (ARRAY['emails', 'payments', 'reports', 'emails-dead'])[1 + g % 4], 'task-' || (g % 20),
            CASE WHEN g % 100 = 2 THEN 'discarded' WHEN g % 100 = 3 THEN 'cancelled' ELSE 'completed' END,
            'tenant-' || (g % 1000), CASE WHEN g % 10 = 0 THEN 'api-' || (g % 5) END,
            now() - make_interval(secs => (g % 7200)),
            now() - make_interval(secs => (g % 600)),
            now() - make_interval(secs => (g % 7200)) - make_interval(secs => (g % 500) / 1000.0),
            CASE WHEN g % 100 = 2 THEN jsonb_build_array(
                     jsonb_build_object('at', now() - make_interval(secs => (g % 7200) + 90), 'kind', 'raised'),
                     jsonb_build_object('at', now() - make_interval(secs => (g % 7200) + 60), 'kind', 'throttled'),
                     jsonb_build_object('at', now() - make_interval(secs => (g % 7200)), 'kind', 'raised'))
                 ELSE '[]'::jsonb END
       FROM generate_series(1, $1::int) g`,
    [total],
  );
  await client.query(`VACUUM ANALYZE stampeded_jobs`);

  const functions = [{ name: 'stampeded_rollup_insights', label: 'built' }];
  if (against) {
    const text = readFileSync(against, 'utf8').replace(/stampeded_rollup_insights\(/, 'stampeded_rollup_insights_against(');
    await client.query(text);
    functions.push({ name: 'stampeded_rollup_insights_against', label: against });
  }
  const rollUp = async (fn) => {
    await client.query('BEGIN');
    try {
      const t = performance.now();
      let jobs = 0;
      for (;;) {
        const {
          rows: [r],
        } = await client.query(ROLLUP_INSIGHTS.text.replace('stampeded_rollup_insights(', `${fn}(`), [
          1,
          10_000,
          INSIGHTS_HISTOGRAM.buckets,
          INSIGHTS_HISTOGRAM.perOctave,
          INSIGHTS_TOP_KEYS,
        ]);
        jobs += r.jobs;
        if (!r.more) break;
      }
      const ms = performance.now() - t;
      const {
        rows: [sums],
      } = await client.query(
        `SELECT (SELECT md5(string_agg(s::text, ',' ORDER BY s.grain, s.queue, s.task, s.bucket)) FROM stampeded_insights s) AS insights,
                (SELECT md5(string_agg(k::text, ',' ORDER BY k.queue, k.task, k.dimension, k.bucket, k.key)) FROM stampeded_insight_keys k) AS keys`,
      );
      return { ms, jobs, sums: `${sums.insights} ${sums.keys}` };
    } finally {
      await client.query('ROLLBACK');
    }
  };
  const seen = new Set();
  for (let run = 1; run <= runs; run++) {
    for (const fn of functions) {
      const { ms, jobs, sums } = await rollUp(fn.name);
      seen.add(sums);
      console.log(`run ${run} ${fn.label}: ${jobs} jobs in ${ms.toFixed(0)} ms, ${((ms / jobs) * 1000).toFixed(1)} ms per 1,000 jobs`);
    }
  }
  if (seen.size !== 1) throw new Error(`the runs left different rows: ${[...seen].join(' / ')}`);
  console.log(`every run left the same rows (${[...seen][0]})`);
} finally {
  await client.end();
  await db.drop?.();
  await server?.stop();
}
