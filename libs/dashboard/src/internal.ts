// @stampeded/dashboard/internal: the statements behind the dashboard's pages,
// for the tests that check the plan each one gets. Not for applications: it
// changes with the dashboard, without notice in the CHANGELOG.
export { listJobsQuery, GET_JOB, ERRORS_BY_FINGERPRINT, THROUGHPUT } from './sql/jobs.sql.js';
export { QUEUE_COUNTS, QUEUE_STATE } from './sql/queues.sql.js';
export { RUNNING_JOBS, WORKERS } from './sql/workers.sql.js';
export { SCHEDULES } from './sql/schedules.sql.js';
