-- +goose Up
-- A job's trace is indexed (job_traces: the forensics search, the alert on
-- enqueues by one principal) by the statement that enqueues it, a
-- data-modifying CTE of JobInsertMany, instead of a statement-level
-- trigger with a transition table. The transition table held every new
-- job's whole row (payload included) for a trigger that reads five
-- columns of it; as for the audit queue (00159) and the outbox's trace
-- index (00160) the trigger cost more than the rows it writes. A job
-- inserted by hand is not indexed by trace.
SET LOCAL ROLE jejak_owner;

DROP TRIGGER jobs_index_traces ON jobs;
DROP FUNCTION jobs_index_traces();
