-- +goose Up
-- The job engine's tables. See docs/jobs.md for the
-- design: every index on jobs costs throughput on each claim and completion
-- (a state change is never a HOT update, because state appears in the
-- partial-index predicates), so there are five, four of them partial and
-- the fifth the primary key.
SET LOCAL ROLE jejak_owner;

CREATE TABLE jobs (
    -- Workers, the dashboard and dead-letter actions address a job by its
    -- global id, so id alone is the primary key (a Citus distribution would
    -- make it (tenant_id, id); see docs/jobs.md).
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id        bigint NOT NULL REFERENCES tenants(id),
    kind             text NOT NULL CHECK (length(kind) BETWEEN 1 AND 100),
    queue            text NOT NULL DEFAULT 'default' CHECK (length(queue) BETWEEN 1 AND 100),
    priority         smallint NOT NULL DEFAULT 0,
    state            text NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'running', 'succeeded', 'dead', 'cancelled')),
    payload          jsonb NOT NULL,
    attempt          int NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts     int NOT NULL DEFAULT 3 CHECK (max_attempts > 0),
    available_at     timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    attempted_at     timestamptz,
    finished_at      timestamptz,
    -- The worker holding a running job, or the last one that ran it.
    worker_id        text,
    lease_expires_at timestamptz,
    last_error       text,
    error_class      text CHECK (error_class IN ('transient', 'permanent', 'policy')),
    -- Attempt history: one object per failed attempt
    -- {attempt, at, worker, class, error}. Failures are rare, so an array on
    -- the row is cheaper than a side table written on the hot path.
    errors           jsonb,
    -- Policy failures (expired, unauthorised, tampered) are flagged for
    -- review.
    flagged          boolean NOT NULL DEFAULT false,
    -- S1 metadata.
    trace_id         text NOT NULL,
    -- No foreign key: a job's history outlives its requester; sensitive
    -- kinds re-verify the requester at dequeue (S2).
    requested_by     bigint,
    requested_at     timestamptz NOT NULL,
    expires_at       timestamptz,
    idempotency_key  text CHECK (idempotency_key <> ''),
    payload_hash     bytea NOT NULL,
    CHECK (state <> 'running' OR (worker_id IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK (state NOT IN ('succeeded', 'dead', 'cancelled') OR finished_at IS NOT NULL)
);

-- The claim path: due pending jobs, per tenant, in priority then due-time
-- order. Leading with tenant_id lets the fair claim walk the distinct
-- tenants with a recursive "loose index scan" and then read each tenant's
-- head. Rows leave the index when claimed.
CREATE INDEX jobs_claim_idx ON jobs (tenant_id, queue, priority, available_at, id)
    WHERE state = 'pending';

-- Running jobs: few at any time (bounded by the workers). Serves lease
-- rescue, the per-tenant concurrency cap and the dashboard's running list.
CREATE INDEX jobs_running_idx ON jobs (tenant_id, lease_expires_at)
    WHERE state = 'running';

-- Dead letters for triage; rare, so almost free.
CREATE INDEX jobs_dead_idx ON jobs (tenant_id, finished_at)
    WHERE state = 'dead';

-- Unique enqueue (J11): one job per (tenant, kind, idempotency key).
CREATE UNIQUE INDEX jobs_idempotency_idx ON jobs (tenant_id, kind, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- A queue table churns: vacuum it early so dead index entries do not pile up
-- in front of the claim scan.
ALTER TABLE jobs SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000,
                      autovacuum_analyze_scale_factor = 0.05);

ALTER TABLE jobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE jobs FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON jobs TO jejak_app
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY system_access ON jobs TO jejak_system USING (true) WITH CHECK (true);

-- Wake sleeping workers when jobs are inserted. Statement-level, so a bulk
-- insert sends one notification, and PostgreSQL folds identical
-- notifications of one transaction into one.
-- +goose StatementBegin
CREATE FUNCTION jobs_notify_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('jejak_jobs', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER jobs_notify_insert AFTER INSERT ON jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_notify_insert();

-- One row per running engine (replica): its heartbeat and load, for the
-- dashboard and for spotting vanished workers. Not tenant data.
CREATE TABLE job_workers (
    worker_id      text PRIMARY KEY,
    started_at     timestamptz NOT NULL,
    last_heartbeat timestamptz NOT NULL,
    running        int NOT NULL DEFAULT 0,
    capacity       int NOT NULL DEFAULT 0,
    queues         text[] NOT NULL DEFAULT '{}',
    -- True on the replica holding the maintenance advisory lock.
    leader         boolean NOT NULL DEFAULT false
);
-- Tenant-facing code has no business with the worker registry.
REVOKE ALL ON job_workers FROM jejak_app;
