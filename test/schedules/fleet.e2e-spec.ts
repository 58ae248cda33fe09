import type pg from 'pg';
import { migrate } from '@stampeded/nestjs';
import type { TestDatabase } from '@stampeded/testing';
import { sqlClient, testDatabase } from '../support/test-app.js';
import { WorkerProcess, type WorkerProcessConfig } from '../support/worker-process.js';

// `npm test` runs this for 12 seconds; `npm run test:schedules-long` for the
// full minute.
const SECONDS = Number(process.env.STAMPEDED_SCHEDULES_FLEET_SECONDS ?? 12);

describe('one every-second schedule, three processes', () => {
  let db: TestDatabase;
  let sql: pg.Client;
  const fleet: WorkerProcess[] = [];

  beforeAll(async () => {
    db = await testDatabase();
    await migrate(db.url);
    sql = await sqlClient(db.url);
  });

  afterAll(async () => {
    await Promise.all(fleet.map((p) => p.stop()));
    await sql?.end();
    await db?.drop();
  });

  it(
    `fires every occurrence exactly once for ${SECONDS} s, through random SIGKILLs and clocks 4 s apart`,
    async () => {
      // Clocks 4 s behind, right, and 4 s ahead: the scheduler reads the
      // database's clock, so none of them fires early, late or twice.
      const configs: WorkerProcessConfig[] = [-4000, 0, 4000].map((skewMs) => ({
        url: db.url,
        tasks: 'fleet',
        tick: true,
        skewMs,
        stampeded: { migrations: 'auto', worker: { enabled: false }, schedules: { pollIntervalMs: 200 } },
      }));
      const slots = configs.map((config) => WorkerProcess.start(config));
      fleet.push(...slots);
      await Promise.all(slots.map((p) => p.ready()));

      // Every few seconds, one of the three dies mid-whatever and a fresh
      // one takes its place.
      const endAt = Date.now() + SECONDS * 1000;
      let restarts = 0;
      while (Date.now() < endAt) {
        await new Promise((r) => setTimeout(r, Math.min(2000 + Math.random() * 2000, Math.max(0, endAt - Date.now()))));
        if (Date.now() >= endAt) break;
        const slot = Math.floor(Math.random() * slots.length);
        await slots[slot].kill();
        slots[slot] = WorkerProcess.start(configs[slot]);
        fleet.push(slots[slot]);
        restarts++;
      }
      await Promise.all(slots.map((p) => p.stop()));

      const { rows: ledger } = await sql.query(
        `SELECT o.occurrence_token::bigint AS token, o.job_id::text, j.inserted_at, to_timestamp(o.occurrence_token::bigint) AS due
           FROM stampeded_cron_occurrences o LEFT JOIN stampeded_jobs j ON j.id = o.job_id
          WHERE o.cron_key = 'tick' ORDER BY 1`,
      );
      const tokens = ledger.map((r) => Number(r.token));
      const [{ jobs }] = (await sql.query(`SELECT count(*)::int AS jobs FROM stampeded_jobs WHERE task = 'tick'`)).rows;

      // Never twice: one job per occurrence, one occurrence per token.
      expect(new Set(tokens).size).toBe(tokens.length);
      expect(jobs).toBe(tokens.length);
      expect(ledger.every((r) => r.job_id !== null)).toBe(true);
      // Never lost: the tokens are consecutive seconds.
      expect(tokens[tokens.length - 1] - tokens[0] + 1).toBe(tokens.length);
      // Never early, whatever the process's own clock said.
      expect(ledger.filter((r) => r.inserted_at.getTime() < r.due.getTime())).toEqual([]);
      expect(tokens.length).toBeGreaterThanOrEqual(SECONDS - 3);

      const duplicates = fleet.flatMap((p) => p.events).filter((e) => e.event === 'fired' && e.outcome === 'duplicate').length;
      const lateness = ledger.map((r) => r.inserted_at.getTime() - r.due.getTime()).sort((a, b) => a - b);
      process.stderr.write(
        `schedule fleet: ${tokens.length} occurrences in ${SECONDS} s, ${restarts} SIGKILL restarts, ` +
          `${duplicates} refused by the ledger, lateness p50 ${lateness[lateness.length >> 1]} ms, max ${lateness[lateness.length - 1]} ms\n`,
      );
    },
    SECONDS * 1000 + 90_000,
  );
});
