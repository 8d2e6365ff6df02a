-- +goose Up
-- Trace index for the incident page (/admin/search?trace=): which jobs
-- carry a trace id. An index on jobs(trace_id) would be rewritten on every
-- state change of every job (state sits in the partial-index predicates, so
-- no update of jobs is HOT); this side table is written once per job, at
-- enqueue, and never updated. A statement-level trigger with a transition
-- table fills it inside the enqueue statement's own execution: no extra
-- round trip, one extra multi-row insert per enqueue statement, and the
-- engine's Go code does not know it exists.
SET LOCAL ROLE jejak_owner;

CREATE TABLE job_traces (
    trace_id   text   NOT NULL,
    job_id     bigint NOT NULL,
    tenant_id  bigint NOT NULL,
    created_at timestamptz NOT NULL,
    -- The requesting user (NULL for system work): the principal-spike
    -- alert rolls enqueues up per principal from here.
    requested_by bigint,
    -- No foreign key to jobs: finished jobs are pruned, and the incident
    -- page still shows that a pruned job belonged to the trace.
    PRIMARY KEY (trace_id, job_id)
);
-- Rows arrive in time order, so a BRIN index serves "enqueued since t"
-- (the alert rollup, pruning) at almost no insert cost.
CREATE INDEX job_traces_created_brin ON job_traces USING brin (created_at);

ALTER TABLE job_traces ENABLE ROW LEVEL SECURITY;
ALTER TABLE job_traces FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON job_traces TO jejak_app
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY system_access ON job_traces TO jejak_system USING (true) WITH CHECK (true);
-- Insert-only for the application; the maintenance leader prunes old rows.
REVOKE UPDATE, DELETE ON job_traces FROM jejak_app;
REVOKE UPDATE ON job_traces FROM jejak_system;

-- +goose StatementBegin
CREATE FUNCTION jobs_index_traces() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_traces (trace_id, job_id, tenant_id, created_at, requested_by)
    SELECT trace_id, id, tenant_id, created_at, requested_by FROM new_jobs;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER jobs_index_traces AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_index_traces();

-- Jobs enqueued before this migration.
INSERT INTO job_traces (trace_id, job_id, tenant_id, created_at, requested_by)
SELECT trace_id, id, tenant_id, created_at, requested_by FROM jobs;
