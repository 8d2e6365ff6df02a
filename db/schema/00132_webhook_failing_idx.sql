-- +goose Up
-- Staff see every failing webhook endpoint on /admin/outbox, across
-- tenants: this index holds only those (an endpoint leaves it at its next
-- success), so the panel costs the same with one endpoint or a million.
SET LOCAL ROLE jejak_owner;

CREATE INDEX webhook_endpoints_failing_idx ON webhook_endpoints (consecutive_failures DESC, tenant_id, id)
    WHERE consecutive_failures > 0 AND deleted_at IS NULL;
