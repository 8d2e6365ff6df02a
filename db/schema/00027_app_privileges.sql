-- +goose Up
-- jejak_app keeps only what tenant-facing code needs. docs/tenancy.md holds
-- the intended privilege table; internal/database's privilege test compares
-- the catalog with it.
SET LOCAL ROLE jejak_owner;

-- Jobs are enqueued by tenants and changed only by the engine and staff
-- (jejak_system): a tenant who could UPDATE a row could rewrite its payload.
REVOKE UPDATE, DELETE, TRUNCATE ON jobs FROM jejak_app;
-- The tenant registry and the price list are staff's.
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON tenants, plans FROM jejak_app;
-- Users: readable (sign-in, names), creatable and editable without the
-- staff role or the active flag, never deletable.
REVOKE ALL ON users FROM jejak_app;
GRANT SELECT ON users TO jejak_app;
GRANT INSERT (email, name, password_hash), UPDATE (name, password_hash) ON users TO jejak_app;
-- Nobody needs TRUNCATE or TRIGGER/REFERENCES grants through the pools.
-- +goose StatementBegin
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relowner = 'jejak_owner'::regrole LOOP
        EXECUTE format('REVOKE TRUNCATE, TRIGGER, REFERENCES ON %I FROM jejak_app, jejak_system', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
ALTER DEFAULT PRIVILEGES FOR ROLE jejak_owner IN SCHEMA public
    REVOKE TRUNCATE, TRIGGER, REFERENCES ON TABLES FROM jejak_app, jejak_system;
