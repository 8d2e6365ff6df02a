-- +goose Up
-- jejak_app keeps only what tenant-facing code needs. docs/tenancy.md holds
-- the intended privilege table; internal/database's privilege test compares
-- the catalog with it.
SET LOCAL ROLE jejak_owner;

-- Jobs are enqueued by tenants and run, retried and pruned by the engine
-- and staff (jejak_system). Tenants never delete them. The enqueuing
-- transaction may still UPDATE the rows it just wrote (payload versions and
-- dependencies are stamped there, and a dependent of a dead job is
-- cancelled), so UPDATE stays, but a trigger pins for the tenant role
-- everything that says what the job is and how it ran: the payload and its
-- hash, tenant, kind, queue, priority, attempts, lease, requester, expiry,
-- idempotency key, history; and the only state change it may make is
-- pending -> cancelled.
REVOKE DELETE, TRUNCATE ON jobs FROM jejak_app;
-- +goose StatementBegin
CREATE FUNCTION jobs_app_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.payload IS DISTINCT FROM OLD.payload OR NEW.payload_hash IS DISTINCT FROM OLD.payload_hash
       OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.kind IS DISTINCT FROM OLD.kind
       OR NEW.queue IS DISTINCT FROM OLD.queue OR NEW.priority IS DISTINCT FROM OLD.priority
       OR NEW.attempt IS DISTINCT FROM OLD.attempt OR NEW.max_attempts IS DISTINCT FROM OLD.max_attempts
       OR NEW.worker_id IS DISTINCT FROM OLD.worker_id OR NEW.lease_expires_at IS DISTINCT FROM OLD.lease_expires_at
       OR NEW.requested_by IS DISTINCT FROM OLD.requested_by OR NEW.requested_at IS DISTINCT FROM OLD.requested_at
       OR NEW.expires_at IS DISTINCT FROM OLD.expires_at OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
       OR NEW.created_at IS DISTINCT FROM OLD.created_at OR NEW.trace_id IS DISTINCT FROM OLD.trace_id
       OR NEW.errors IS DISTINCT FROM OLD.errors OR NEW.error_class IS DISTINCT FROM OLD.error_class
       OR NEW.flagged IS DISTINCT FROM OLD.flagged OR NEW.attempted_at IS DISTINCT FROM OLD.attempted_at
       OR (NEW.state IS DISTINCT FROM OLD.state AND NOT (OLD.state = 'pending' AND NEW.state = 'cancelled')) THEN
        RAISE EXCEPTION 'jobs: the tenant role may not change job % this way', OLD.id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
-- Only for the tenant role: the engine's own updates (claims, completions)
-- skip the function call (a cached role-membership test per row).
CREATE TRIGGER jobs_app_guard BEFORE UPDATE ON jobs
    FOR EACH ROW WHEN (NOT pg_has_role('jejak_system', 'USAGE'))
    EXECUTE FUNCTION jobs_app_guard();
-- The tenant registry and the price list are staff's.
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON tenants, plans FROM jejak_app;
-- Users: readable (sign-in, names), creatable and editable, never
-- deletable; the staff role and the active flag are staff's alone. A
-- trigger rather than column grants, so columns added later (a user's
-- locale) stay editable without another grant.
REVOKE DELETE, TRUNCATE ON users FROM jejak_app;
-- +goose StatementBegin
CREATE FUNCTION users_app_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (TG_OP = 'INSERT' AND (NEW.staff_role IS NOT NULL OR NOT NEW.active))
       OR (TG_OP = 'UPDATE' AND (NEW.staff_role IS DISTINCT FROM OLD.staff_role OR NEW.active IS DISTINCT FROM OLD.active)) THEN
        RAISE EXCEPTION 'users: the tenant role may not set a staff role or the active flag'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER users_app_guard BEFORE INSERT OR UPDATE ON users
    FOR EACH ROW WHEN (NOT pg_has_role('jejak_system', 'USAGE'))
    EXECUTE FUNCTION users_app_guard();
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
