import { INSIGHTS_HISTOGRAM, INSIGHTS_TOP_KEYS, ROLLUP_INSIGHTS } from '@stampeded/nestjs/internal';
import { cli } from '../support/cli.js';
import { migratedDatabase } from '../support/test-app.js';

// `stampeded insights`: what the dashboard's insights page draws, as text
// and as JSON, from the rollup of jobs finished in the last hour.
describe('stampeded insights', () => {
  const handle = migratedDatabase();

  beforeAll(async () => {
    // In the last hour: 30 mail jobs completed (one retried first) and 2 discarded, a minute apart, for two tenants.
    await handle.sql.query(
      `INSERT INTO stampeded_jobs (queue, task, state, tenant_id, finished_at, claimed_at, scheduled_at, errors)
       SELECT 'mail', 'deliver', CASE WHEN g <= 30 THEN 'completed' ELSE 'discarded' END, CASE WHEN g % 3 = 0 THEN 'acme' ELSE 'globex' END,
              now() - g * interval '1 minute', now() - g * interval '1 minute' - interval '120 ms', now() - g * interval '1 minute' - interval '150 ms',
              CASE WHEN g = 1 THEN jsonb_build_array(jsonb_build_object('at', now() - interval '70 s', 'attempt', 1, 'kind', 'raised'))
                   ELSE '[]'::jsonb END
         FROM generate_series(1, 32) g`,
    );
    await handle.sql.query(ROLLUP_INSIGHTS.text, [1, 10_000, INSIGHTS_HISTOGRAM.buckets, INSIGHTS_HISTOGRAM.perOctave, INSIGHTS_TOP_KEYS]);
  });

  it('prints the range, its totals and percentiles, a row a minute, and the busiest tenants', async () => {
    const run = await cli(handle.db.url, ['insights', '--queue', 'mail']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('finished:          30 completed, 2 discarded, 0 cancelled');
    expect(run.stdout).toContain('failed attempts:   1, 1 of them retried');
    expect(run.stdout).toMatch(/run time: +p50 1\d\d ms, p95 1\d\d ms, p99 1\d\d ms/);
    expect(run.stdout).toMatch(/^globex +22 +2$/m);
    expect(run.stdout).toMatch(/^acme +10 +0$/m);
  });

  it('answers JSON with --json, and a range it does not know with exit 2', async () => {
    const json = await cli(handle.db.url, ['--json', 'insights', '--range', 'day']);
    expect(json.code).toBe(0);
    expect(json.json()).toMatchObject({ range: 'day', grain: 'hour', totals: { completed: 30, discarded: 2, failed: 1, retried: 1 } });
    expect(json.json().points).toHaveLength(24);
    const bad = await cli(handle.db.url, ['insights', '--range', 'month']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/range must be one of hour, day, week/);
  });
});
