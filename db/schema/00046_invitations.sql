-- +goose Up
-- Invitations to join a tenant, sent by its owners from the members page.
-- A pending invitation is one neither accepted nor revoked; an address has
-- at most one pending invitation per tenant.
SET LOCAL ROLE jejak_owner;

CREATE TABLE invitations (
    tenant_id   bigint NOT NULL REFERENCES tenants(id),
    id          bigint GENERATED ALWAYS AS IDENTITY,
    email       text NOT NULL CHECK (email = lower(email) AND position('@' in email) > 1 AND length(email) <= 254),
    role        text NOT NULL CHECK (role IN ('admin', 'member')),
    invited_by  bigint REFERENCES users(id),
    created_at  timestamptz NOT NULL,
    accepted_at timestamptz,
    revoked_at  timestamptz,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (id)
);
CREATE UNIQUE INDEX invitations_pending_idx ON invitations (tenant_id, email)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;
-- An invited person, once signed in, finds their invitations across tenants.
CREATE INDEX invitations_email_idx ON invitations (email)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;

ALTER TABLE invitations ENABLE ROW LEVEL SECURITY;
ALTER TABLE invitations FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON invitations TO jejak_app
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY system_access ON invitations TO jejak_system USING (true) WITH CHECK (true);
REVOKE DELETE ON invitations FROM jejak_app;
