-- +goose Up
SET LOCAL ROLE jejak_owner;

-- The tenant of the current transaction, set by database.InTenantTx with
-- set_config('app.tenant_id', id, true). NULL when unset: a request that
-- forgot to scope itself reads nothing. (current_setting returns '' rather
-- than NULL once the setting has been used in a session, hence NULLIF.)
-- +goose StatementBegin
CREATE FUNCTION app_tenant_id() RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT NULLIF(current_setting('app.tenant_id', true), '')::bigint
$$;
-- +goose StatementEnd

-- Every tenant-owned table: RLS enabled and forced (so even the owner is
-- subject to it), one policy for jejak_app that pins rows to the current
-- tenant for reads and writes, and one for jejak_system that sees all.
-- Tables added later follow the same pattern (see docs/tenancy.md).
-- +goose StatementBegin
DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memberships', 'projects', 'subscriptions', 'subscription_changes'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_isolation ON %I TO jejak_app USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id())', t);
        EXECUTE format('CREATE POLICY system_access ON %I TO jejak_system USING (true) WITH CHECK (true)', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
