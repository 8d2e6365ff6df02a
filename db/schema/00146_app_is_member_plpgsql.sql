-- +goose Up
-- The membership check of every jejak_app policy, "(SELECT app_is_member())",
-- runs once per statement and table as an InitPlan. As a SQL function with
-- SECURITY DEFINER and its own search_path it can never be inlined, and
-- PostgreSQL 15 parses and plans a SQL function's body on every call: about
-- 0.19 ms each (pgbench, one session, 20 calls per transaction: 0.30 ms a
-- call against 0.11 ms for SELECT 1), twice for the trail's timeline
-- (events and leaves), five times for the owner's home. PL/pgSQL keeps its
-- statements' plans for the session, so the same check costs about 0.03 ms.
-- Same answer: true when no user is set (workers, system paths), else
-- whether that user is an active member of app.tenant_id's tenant.
SET LOCAL ROLE jejak_owner;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION app_is_member() RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    uid bigint := public.app_user_id();
BEGIN
    IF uid IS NULL THEN
        RETURN true;
    END IF;
    RETURN EXISTS (SELECT 1 FROM public.memberships m JOIN public.users u ON u.id = m.user_id
                    WHERE m.tenant_id = public.app_tenant_id() AND m.user_id = uid AND u.active);
END
$$;
-- +goose StatementEnd
