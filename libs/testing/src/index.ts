export { startPostgres } from './postgres/start-postgres.js';
export type { StartedPostgres, StartPostgresOptions } from './postgres/start-postgres.js';
export { createTestDatabase } from './postgres/test-database.js';
export type { TestDatabase } from './postgres/test-database.js';
export { drain, expectEnqueued } from './drain/drain.js';
export type { ExpectEnqueuedOptions } from './drain/drain.js';
export { TestClock } from './clock/test-clock.js';
export type { DrainOptions, DrainResult } from '@stampeded/nestjs/internal-runtime';
