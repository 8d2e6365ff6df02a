-- +goose Up
-- In-process alerting (internal/alert): the maintenance leader evaluates
-- each rule every few seconds and keeps its state here; every transition
-- (pending, firing, resolved) is kept as history for /admin/alerts. None of
-- this is tenant data: the tenant-facing role has no access.
SET LOCAL ROLE jejak_owner;

CREATE TABLE alert_states (
    rule      text PRIMARY KEY CHECK (rule ~ '^[a-z][a-z0-9_]*$'),
    state     text NOT NULL CHECK (state IN ('ok', 'pending', 'firing')),
    -- When the rule entered its current state.
    since     timestamptz NOT NULL,
    value     double precision NOT NULL DEFAULT 0,
    summary   text NOT NULL DEFAULT '',
    evaluated_at timestamptz NOT NULL
);

CREATE TABLE alert_events (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    rule    text NOT NULL,
    state   text NOT NULL CHECK (state IN ('pending', 'firing', 'resolved')),
    value   double precision NOT NULL,
    summary text NOT NULL DEFAULT '',
    at      timestamptz NOT NULL
);
CREATE INDEX alert_events_at_idx ON alert_events (at DESC, id DESC);

-- Enqueues per principal (tenant, requesting user; 0 = none) per minute,
-- rolled up by the leader from job_traces since a watermark, so the
-- "principal far above its own normal" rule compares a window with that
-- principal's own day without scanning a day of jobs.
CREATE TABLE alert_principal_minute (
    tenant_id bigint NOT NULL,
    principal bigint NOT NULL,
    minute    timestamptz NOT NULL,
    n         bigint NOT NULL CHECK (n >= 0),
    PRIMARY KEY (minute, tenant_id, principal)
);

-- Attempts and failures per worker per minute, flushed by each replica
-- from in-memory counters (one upsert per replica per flush, off the
-- job hot path) for the "one worker failing more than its peers" rule.
CREATE TABLE alert_worker_minute (
    worker_id text NOT NULL,
    minute    timestamptz NOT NULL,
    attempts  bigint NOT NULL CHECK (attempts >= 0),
    failures  bigint NOT NULL CHECK (failures >= 0),
    PRIMARY KEY (minute, worker_id)
);

-- How far the principal rollup has read job_traces.
CREATE TABLE alert_watermarks (
    name text PRIMARY KEY,
    upto timestamptz NOT NULL
);

-- The principal rollup is keyed by tenant: row-level security like every
-- tenant table, although the tenant-facing role has no privilege on it.
ALTER TABLE alert_principal_minute ENABLE ROW LEVEL SECURITY;
ALTER TABLE alert_principal_minute FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON alert_principal_minute TO jejak_app
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY system_access ON alert_principal_minute TO jejak_system USING (true) WITH CHECK (true);

REVOKE ALL ON alert_states, alert_events, alert_principal_minute, alert_worker_minute, alert_watermarks FROM jejak_app;
