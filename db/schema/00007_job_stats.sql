-- +goose Up
-- Per-minute rollup of finished job attempts for the staff queue overview:
-- the overview reads the last hour from here instead of
-- counting the jobs table, which holds a million rows at scale and loses
-- finished jobs to retention anyway. The engine adds to the current minute
-- as it completes and fails jobs (job.StatsRecordFinished /
-- job.StatsRecordSucceeded); the maintenance leader prunes old minutes
-- (job.StatsPrune).
SET LOCAL ROLE jejak_owner;

CREATE TABLE job_stats_minute (
    tenant_id bigint NOT NULL REFERENCES tenants(id),
    -- date_trunc('minute', finish time), UTC.
    minute    timestamptz NOT NULL,
    kind      text NOT NULL CHECK (length(kind) BETWEEN 1 AND 100),
    -- Attempts that succeeded.
    succeeded bigint NOT NULL DEFAULT 0 CHECK (succeeded >= 0),
    -- Attempts that failed (retried or not); dead counts those of them that
    -- became dead letters, so failed >= dead.
    failed    bigint NOT NULL DEFAULT 0 CHECK (failed >= 0),
    dead      bigint NOT NULL DEFAULT 0 CHECK (dead >= 0),
    PRIMARY KEY (tenant_id, minute, kind)
);

-- The overview reads one hour across all tenants: a small range scan on
-- minute. (A tenant's own chart uses the primary key.)
CREATE INDEX job_stats_minute_minute_idx ON job_stats_minute (minute);

ALTER TABLE job_stats_minute ENABLE ROW LEVEL SECURITY;
ALTER TABLE job_stats_minute FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON job_stats_minute TO jejak_app
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY system_access ON job_stats_minute TO jejak_system USING (true) WITH CHECK (true);
-- Tenants may read their own figures; only the engine (jejak_system) writes.
REVOKE INSERT, UPDATE, DELETE ON job_stats_minute FROM jejak_app;
