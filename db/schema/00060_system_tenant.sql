-- +goose Up
-- A reserved tenant for Jejak's own staff notifications. Outbox messages,
-- webhook endpoints and jobs all belong to a tenant (tenant_id NOT NULL),
-- so alert transitions travel the tenant path (outbox → relay → JetStream
-- → fan-out → webhook.deliver) as this tenant's events. Nobody is a member
-- of it, and every list or figure of customer tenants leaves it out
-- (tenants.is_system).
SET LOCAL ROLE jejak_owner;

ALTER TABLE tenants ADD COLUMN is_system boolean NOT NULL DEFAULT false;
-- At most one system tenant.
CREATE UNIQUE INDEX tenants_system_idx ON tenants (is_system) WHERE is_system;
-- A plain INSERT: if a customer tenant already has the slug, the migration
-- fails rather than turning that tenant into the system one.
INSERT INTO tenants (slug, name, time_zone, is_system)
VALUES ('jejak-system', 'Jejak system (staff notifications)', 'UTC', true);

-- The outbox message that carried a transition to the staff webhook (NULL
-- when none was configured). No foreign key: delivered messages are pruned,
-- the webhook delivery (keyed by the same id) stays.
ALTER TABLE alert_events ADD COLUMN outbox_id bigint;
