-- +goose Up
-- The trace side tables (job_traces, outbox_traces) are read by trace id,
-- a handful of rows at a time (the incident page), and by small created_at
-- ranges in INSERT and DELETE statements (the alert rollup, pruning),
-- which never run in parallel. A parallel scan never pays for them, yet
-- the planner picks one when their statistics lag: they are filled by
-- statement triggers in bulk, so a table of a million rows can still carry
-- the estimate of an empty one. At 1M jobs without statistics, the
-- incident page's trace lookup (0.3 ms as a plain index scan) became a
-- parallel bitmap scan and a gather whose worker start-up took 10-150 ms.
-- With no parallel workers for these tables the lookup is an index scan
-- whatever the statistics.
SET LOCAL ROLE jejak_owner;

ALTER TABLE job_traces SET (parallel_workers = 0);
ALTER TABLE outbox_traces SET (parallel_workers = 0);
