-- +goose Up
-- Read-only audit tokens: a witness outside the operator (web audit
-- witness, run by a tenant or an auditor) authenticates with one to read
-- the tenant's log endpoints (checkpoint, proofs, entries) and nothing
-- else. Owners and admins create and revoke them on the trail page; the
-- trail records creation, use and revocation.
SET LOCAL ROLE jejak_owner;

CREATE TABLE audit_tokens (
    tenant_id    bigint NOT NULL REFERENCES tenants(id),
    id           bigint GENERATED ALWAYS AS IDENTITY,
    name         text   NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
    -- SHA-256 of the token: the token itself is shown once, at creation,
    -- and never stored.
    token_hash   bytea  NOT NULL CHECK (length(token_hash) = 32),
    created_by   bigint NOT NULL REFERENCES users(id),
    created_at   timestamptz NOT NULL,
    -- Moved at most once a minute per token: each move records a use.
    last_used_at timestamptz,
    revoked_by   bigint REFERENCES users(id),
    revoked_at   timestamptz,
    PRIMARY KEY (tenant_id, id),
    -- A request names its tenant (the slug in the path), so a token is
    -- looked up within it: another tenant's token is simply not there.
    UNIQUE (tenant_id, token_hash),
    CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
);

-- Owners manage their tenant's tokens, and a presented token is checked
-- in its tenant's transaction: all tenant-scoped. Nobody deletes one (a
-- revoked token stays listed, as the trail names it).
REVOKE ALL ON audit_tokens FROM jejak_app, jejak_system;
GRANT SELECT, INSERT, UPDATE ON audit_tokens TO jejak_app;
GRANT SELECT ON audit_tokens TO jejak_system;

ALTER TABLE audit_tokens ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_tokens FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON audit_tokens TO jejak_app
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY system_access ON audit_tokens TO jejak_system USING (true) WITH CHECK (true);
