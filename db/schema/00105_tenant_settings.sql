-- +goose Up
-- A tenant's settings its owners change. members_see_billing lets members
-- (read-only) open the billing page; by default invoices are for owners
-- and admins only. No row means every default.
SET LOCAL ROLE jejak_owner;

CREATE TABLE tenant_settings (
    tenant_id           bigint PRIMARY KEY REFERENCES tenants(id),
    members_see_billing boolean NOT NULL DEFAULT false,
    updated_by          bigint REFERENCES users(id),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

-- Owners change them in the tenant's own transaction; nobody deletes a row.
REVOKE ALL ON tenant_settings FROM jejak_app, jejak_system;
GRANT SELECT, INSERT, UPDATE ON tenant_settings TO jejak_app;
GRANT SELECT ON tenant_settings TO jejak_system;

ALTER TABLE tenant_settings ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenant_settings FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tenant_settings TO jejak_app
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY system_access ON tenant_settings TO jejak_system USING (true) WITH CHECK (true);
