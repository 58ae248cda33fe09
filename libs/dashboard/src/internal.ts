// @stampeded/dashboard/internal: the statements behind the dashboard's pages,
// for the tests that check the plan each one gets. Not for applications: it
// changes with the dashboard, without notice in the CHANGELOG.
export { GET_JOB, ERRORS_BY_FINGERPRINT, THROUGHPUT } from './sql/jobs.sql.js';
export { listJobsQuery } from './sql/job-list.sql.js';
export { DEAD_LETTER_COPY, DEDUP_TWINS, NEIGHBOUR_SCAN, ORDERING_NEIGHBOURS, WORKFLOW_PLACE } from './sql/related.sql.js';
export { QUEUE_COUNTS, QUEUE_STATE } from './sql/queues.sql.js';
export { RUNNING_JOBS, WORKERS } from './sql/workers.sql.js';
export { SCHEDULES } from './sql/schedules.sql.js';
export { DashboardPagesController } from './controllers/dashboard-pages.controller.js';
export { INSIGHTS_KEYS, INSIGHTS_NAMES, INSIGHTS_POINTS, INSIGHTS_WATERMARK } from './sql/insights.sql.js';
