import pg from 'pg';
import { writableHostClient } from '@stampeded/nestjs';
import { startPrimary, startStandby, type StartedPrimary, type Standby } from '../support/standby.js';
import { waitFor } from '../support/test-app.js';

// node-postgres takes one host; writableHostClient() is how an app lists the
// primary and its standbys and reaches whichever takes writes, before and
// after a failover.
describe('writableHostClient()', () => {
  let primary: StartedPrimary;
  let standby: Standby;
  let pool: pg.Pool | undefined;

  beforeAll(async () => {
    primary = await startPrimary();
    standby = await startStandby(primary);
  });

  afterAll(async () => {
    await pool?.end().catch(() => {});
    await standby?.stop();
    await primary?.stop();
  });

  const port = async (p: pg.Pool) => (await p.query<{ port: number }>('SELECT inet_server_port() AS port')).rows[0].port;

  it('connects to the primary though the standby is listed first, and to the promoted standby after a failover', async () => {
    const hosts = [`127.0.0.1:${standby.port}`, `127.0.0.1:${primary.port}`];
    // The URL names the standby: the host list decides, not the URL.
    pool = new pg.Pool({ connectionString: standby.url, Client: writableHostClient(hosts), max: 2 });
    pool.on('error', () => {});
    expect(await port(pool)).toBe(primary.port);
    await pool.query('CREATE TABLE written (id int)');

    await primary.kill('SIGKILL');
    // The pool's idle connections died with the primary (a query on one
    // fails as it is found dead); a new one finds no host that takes writes.
    const refused = await waitFor(
      () =>
        pool!.query('SELECT 1').then(
          () => undefined,
          (err: Error & { code?: string }) => (err.code === '08001' ? err : undefined),
        ),
      'a connect that finds no writable host',
    );
    expect(refused.message).toContain(`127.0.0.1:${standby.port} is read-only`);

    await standby.promote();
    expect(await port(pool)).toBe(standby.port);
    await pool.query('INSERT INTO written VALUES (1)');
    expect((await pool.query('SELECT count(*)::int AS n FROM written')).rows).toEqual([{ n: 1 }]);
  });

  it('refuses an empty list or an entry that is not host:port', () => {
    expect(() => writableHostClient([])).toThrow(/at least one host/);
    expect(() => writableHostClient(['db:port'])).toThrow(/not a host or host:port/);
  });
});
