-- +goose Up
-- Three roles split power. jejak_owner owns every table and runs migrations.
-- jejak_app is what the application's tenant-facing pool runs as: it owns
-- nothing, is not a superuser, cannot bypass row-level security, and its
-- policies only show the tenant set for the current transaction.
-- jejak_system is the one explicit cross-tenant path: the worker pool and the
-- staff pages run as it, through a separate pool; it is not BYPASSRLS either,
-- it simply has its own permissive policies. jejak_app is not a member of
-- jejak_system, so tenant-facing code cannot switch to it.
-- Roles are cluster-wide, so creation is guarded: every database of a cluster
-- (and every test clone) shares them.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'jejak_owner') THEN
        CREATE ROLE jejak_owner NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'jejak_app') THEN
        CREATE ROLE jejak_app NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'jejak_system') THEN
        CREATE ROLE jejak_system NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
END
$$;
-- +goose StatementEnd

GRANT USAGE, CREATE ON SCHEMA public TO jejak_owner;
GRANT USAGE ON SCHEMA public TO jejak_app, jejak_system;

-- Whatever jejak_owner creates from now on is usable (not owned) by both
-- application roles.
-- Audit tables narrow this to SELECT, INSERT in their own migration.
ALTER DEFAULT PRIVILEGES FOR ROLE jejak_owner IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO jejak_app, jejak_system;
ALTER DEFAULT PRIVILEGES FOR ROLE jejak_owner IN SCHEMA public
    GRANT USAGE, SELECT ON SEQUENCES TO jejak_app, jejak_system;
ALTER DEFAULT PRIVILEGES FOR ROLE jejak_owner IN SCHEMA public
    GRANT EXECUTE ON FUNCTIONS TO jejak_app, jejak_system;

-- Later migrations run as jejak_owner (SET LOCAL ROLE) and goose records
-- their versions inside the same transaction, so the owner role owns the
-- version table too.
ALTER TABLE goose_db_version OWNER TO jejak_owner;
