import type { DataSource } from 'typeorm';
import { connectionSettingsOf } from './data-source-connection.js';

const replicated = {
  options: {
    type: 'postgres',
    database: 'app',
    replication: { master: { host: 'writer', port: 5432, username: 'app' }, slaves: [{ host: 'reader-1', port: 5433, username: 'ro' }, { host: 'reader-2' }] },
  },
} as unknown as DataSource;

describe('connectionSettingsOf', () => {
  it('connects as the writer of a replicated DataSource, and a readConnection as its first replica', () => {
    expect(connectionSettingsOf(replicated)).toMatchObject({ host: 'writer', port: 5432, user: 'app' });
    expect(connectionSettingsOf(replicated, true)).toMatchObject({ host: 'reader-1', port: 5433, user: 'ro' });
  });

  it('reads a plain DataSource the same either way', () => {
    const plain = { options: { type: 'postgres', url: 'postgres://db/app' } } as unknown as DataSource;
    expect(connectionSettingsOf(plain, true)).toEqual(connectionSettingsOf(plain));
    expect(connectionSettingsOf(plain).connectionString).toBe('postgres://db/app');
  });
});
