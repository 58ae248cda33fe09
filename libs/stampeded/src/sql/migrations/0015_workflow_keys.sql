-- Migration 15: a workflow's names and edges without foreign keys to it.
--
-- stampeded_workflow_jobs and stampeded_workflow_edges referenced
-- stampeded_workflows (ON DELETE CASCADE). A foreign key is checked row by
-- row: a 10,000-job fan-out/fan-in wrote 10,002 names and 20,000 edges, and
-- made 30,002 checks of the one workflow row the same statement had just
-- inserted, a quarter to a third of the enqueue's statement
-- (bench/RESULTS.md, "Workflows": 1,030-1,376 ms with them, 728-753 ms
-- without, interleaved on the same machine).
--
-- The rows are written only by the workflow enqueue, in the statement that
-- inserts their workflow under the id it passes to all three, so the check
-- could never fail; and deleted only by the pruner (PRUNE_WORKFLOWS in
-- workflows.sql.ts), which now deletes a workflow's names and edges in the
-- statement that deletes it, through the names' primary key and the edges'
-- workflow index. Dropping the keys takes each table's lock for an instant
-- and reads no rows.
ALTER TABLE stampeded_workflow_jobs DROP CONSTRAINT IF EXISTS stampeded_workflow_jobs_workflow_id_fkey;
ALTER TABLE stampeded_workflow_edges DROP CONSTRAINT IF EXISTS stampeded_workflow_edges_workflow_id_fkey;
