-- +goose Up
-- Webhook endpoints that keep failing: a circuit breaker per endpoint (held
-- deliveries wait without burning attempts), automatic disabling after a
-- long run of failures, an owner-set rate limit counted in the row (so
-- every replica honours it), deletion that keeps the delivery log, and
-- per-aggregate ordering as an opt-in. Plus an hourly tally of attempt
-- outcomes per endpoint for the 24 h success rate.
SET LOCAL ROLE jejak_owner;

ALTER TABLE webhook_endpoints
    -- Failed attempts since the last success; the breaker opens at a
    -- threshold the delivery workers are configured with.
    ADD COLUMN consecutive_failures int NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
    -- The first failure of the current run (NULL after a success): an
    -- endpoint failing for days is disabled.
    ADD COLUMN failing_since timestamptz,
    -- While in the future, no attempt is made (open, or a probe in flight).
    ADD COLUMN breaker_open_until timestamptz,
    -- Messages per second the owner allows (NULL = no limit), counted in
    -- one-second windows.
    ADD COLUMN rate_limit int CHECK (rate_limit BETWEEN 1 AND 1000),
    ADD COLUMN rate_window timestamptz,
    ADD COLUMN rate_count int NOT NULL DEFAULT 0 CHECK (rate_count >= 0),
    -- Deliveries of one aggregate go one at a time, in order.
    ADD COLUMN ordered boolean NOT NULL DEFAULT false,
    -- Deleted endpoints keep their rows (their deliveries reference them);
    -- they leave every list, count and match.
    ADD COLUMN deleted_at timestamptz;

-- "type/id" of the event's aggregate, for ordered endpoints (NULL for
-- deliveries made before it was recorded).
ALTER TABLE webhook_deliveries ADD COLUMN aggregate text;
CREATE INDEX webhook_deliveries_pending_idx ON webhook_deliveries (tenant_id, endpoint_id, aggregate, id)
    WHERE state = 'pending';
-- Recover: an endpoint's failed deliveries since a time.
CREATE INDEX webhook_deliveries_failed_idx ON webhook_deliveries (tenant_id, endpoint_id, created_at)
    WHERE state = 'failed';

CREATE TABLE webhook_endpoint_hours (
    tenant_id   bigint NOT NULL REFERENCES tenants(id),
    endpoint_id bigint NOT NULL,
    hour        timestamptz NOT NULL,
    succeeded   int NOT NULL DEFAULT 0 CHECK (succeeded >= 0),
    failed      int NOT NULL DEFAULT 0 CHECK (failed >= 0),
    PRIMARY KEY (tenant_id, endpoint_id, hour),
    FOREIGN KEY (tenant_id, endpoint_id) REFERENCES webhook_endpoints (tenant_id, id)
);
REVOKE DELETE ON webhook_endpoint_hours FROM jejak_app;
ALTER TABLE webhook_endpoint_hours ENABLE ROW LEVEL SECURITY;
ALTER TABLE webhook_endpoint_hours FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON webhook_endpoint_hours TO jejak_app
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY system_access ON webhook_endpoint_hours TO jejak_system USING (true) WITH CHECK (true);
