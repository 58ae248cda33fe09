-- Migration 16: the lines a running handler writes with ctx.log(), stored
-- with its job.
--
-- A SIDE TABLE, not a column of stampeded_jobs. The jobs row is the claim's
-- hot row: the claim and the completion each write a new version of it
-- (NOTES.md, "Batched claims and completions through the primary key";
-- bench/RESULTS.md, "The narrow row over a job's whole life"), and every
-- byte it carries is paid again in each version's WAL once an update has to
-- leave its page. Lines kept in a column would make that row up to a few
-- hundred KB for a job that logs (TOASTed, but each write of new lines
-- rewrites the whole value, and its WAL with it), and a job that never logs
-- would still carry the column. Here, a job that does not log has no row and
-- costs nothing: the enqueue, the claim and the completion are the
-- statements they were (bench/RESULTS.md, "Job logs", has the sql-cost
-- numbers before and after). A job that logs writes only its new lines, a
-- row each, at most once a second (worker/log-reporter.ts).
--
-- ONE ROW PER LINE, keyed by (job_id, seq). seq numbers every line of the
-- job, over all its attempts, from 1, those dropped included: the worker
-- keeps the last lines of a handler that logs faster than it writes and
-- numbers past the ones it dropped, and the write deletes the lines beyond
-- the task's cap (logs.maxLines, 100 by default). The lines kept are always
-- the newest, and max(seq) - count(*) is how many were dropped. attempt and
-- at are the run's attempt and when the handler wrote the line.
--
-- Written only by stampeded_log_lines, fenced by (claimed_by, attempt) as
-- every write of a running job is. Deleted with their job by the runtime's
-- deletions of jobs: the pruner (stampeded_prune), the removal on completion
-- (stampeded_complete_many) and the redrive of dead letters, each in the
-- statement that deletes the job, through this primary key. No foreign key:
-- a key to stampeded_jobs would put a trigger on every deletion of a job,
-- logged or not, and check each line's insert against the hot row. Lines of
-- a job deleted by other means (by hand, or with an UNLOGGED partition a
-- crash emptied) stay until deleted the same way.
--
-- The message's size check is the schema's backstop for other runtimes: the
-- worker cuts a line to the task's logs.maxLineBytes (2 KB by default, 64 KB
-- at most) before it sends it.
CREATE TABLE stampeded_job_logs (
    job_id  uuid        NOT NULL,
    seq     integer     NOT NULL CHECK (seq >= 1),
    attempt smallint    NOT NULL,
    at      timestamptz NOT NULL,
    message text        NOT NULL CHECK (octet_length(message) <= 65536),
    PRIMARY KEY (job_id, seq)
);
