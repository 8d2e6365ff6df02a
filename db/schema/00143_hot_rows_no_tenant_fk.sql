-- +goose Up
-- The rows written for every job of a tenant (its message claim, ledger
-- row, balance and outbox message) no longer check a foreign key to
-- tenants, for the reason audit_events lost its own (migration 00141):
-- each check locks the tenant's row FOR KEY SHARE, so every concurrent
-- transaction of a tenant (points batches on every replica, each
-- audited write's outbox message) joins one multixact on that row, each
-- new locker copying the list of the current ones. Measured on the
-- replicas benchmark: four key checks per points.award job, the most
-- frequent statement of the run. The tenant id stays pinned: jejak_app
-- inserts only the tenant its transaction is scoped to (row-level
-- security), the system role writes these rows only for a job's or an
-- event's tenant, and tenants are never deleted.
SET LOCAL ROLE jejak_owner;

ALTER TABLE processed_messages DROP CONSTRAINT processed_messages_tenant_id_fkey;
ALTER TABLE points_ledger DROP CONSTRAINT points_ledger_tenant_id_fkey;
ALTER TABLE points_balances DROP CONSTRAINT points_balances_tenant_id_fkey;
ALTER TABLE outbox_messages DROP CONSTRAINT outbox_messages_tenant_id_fkey;
