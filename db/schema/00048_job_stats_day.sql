-- +goose Up
-- Finished job attempts per tenant per day (in the tenant's time zone), for
-- the owner's 30-day job chart. job_stats_minute keeps only two days, so
-- before pruning minutes the maintenance leader folds the last two local
-- days into this table (job.StatsFoldDays); a chart reads older days from
-- here and the last two days straight from the minutes.
SET LOCAL ROLE jejak_owner;

CREATE TABLE job_stats_day (
    tenant_id bigint NOT NULL REFERENCES tenants(id),
    day       date   NOT NULL,
    succeeded bigint NOT NULL DEFAULT 0 CHECK (succeeded >= 0),
    failed    bigint NOT NULL DEFAULT 0 CHECK (failed >= 0),
    dead      bigint NOT NULL DEFAULT 0 CHECK (dead >= 0),
    PRIMARY KEY (tenant_id, day)
);

ALTER TABLE job_stats_day ENABLE ROW LEVEL SECURITY;
ALTER TABLE job_stats_day FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON job_stats_day TO jejak_app
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY system_access ON job_stats_day TO jejak_system USING (true) WITH CHECK (true);
REVOKE INSERT, UPDATE, DELETE ON job_stats_day FROM jejak_app;
