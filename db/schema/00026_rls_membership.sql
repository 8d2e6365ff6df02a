-- +goose Up
-- Row-level security checks membership, not only the tenant the code chose.
-- database.InTenantTx sets app.user_id beside app.tenant_id when the
-- transaction runs for a signed-in user; the jejak_app policies then also
-- require that user to be an active member of that tenant. The check is a
-- STABLE function called as an uncorrelated sub-select, "(SELECT
-- app_is_member())", which PostgreSQL runs once per statement as an
-- InitPlan, not once per row. Worker and system paths set no user and stay
-- scoped by tenant alone (they never act for a person who could be a
-- stranger).
SET LOCAL ROLE jejak_owner;

-- +goose StatementBegin
CREATE FUNCTION app_user_id() RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT NULLIF(current_setting('app.user_id', true), '')::bigint
$$;
-- +goose StatementEnd

-- SECURITY DEFINER: memberships is itself under row-level security, and
-- the check must see the membership row it is asking about.
-- +goose StatementBegin
CREATE FUNCTION app_is_member() RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT public.app_user_id() IS NULL
        OR EXISTS (SELECT 1 FROM public.memberships m JOIN public.users u ON u.id = m.user_id
                    WHERE m.tenant_id = public.app_tenant_id() AND m.user_id = public.app_user_id()
                      AND u.active)
$$;
-- +goose StatementEnd

-- The owner role reads memberships only through app_is_member().
CREATE POLICY owner_membership_check ON memberships FOR SELECT TO jejak_owner USING (true);

-- Every jejak_app policy that scopes rows by app_tenant_id() also requires
-- membership. The rewrite walks the catalog and is idempotent; it runs here
-- and again after every migration run (database.MigrateDB), so tables added
-- by later migrations get the check too (the RLS test in internal/database
-- fails for any jejak_app policy without it).
-- +goose StatementBegin
CREATE FUNCTION app_enforce_membership() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    p record;
    n integer := 0;
BEGIN
    FOR p IN
        SELECT pol.polname, c.relname,
               pg_get_expr(pol.polqual, pol.polrelid) AS qual,
               pg_get_expr(pol.polwithcheck, pol.polrelid) AS wcheck
          FROM pg_policy pol
          JOIN pg_class c ON c.oid = pol.polrelid
          JOIN pg_namespace ns ON ns.oid = c.relnamespace
         WHERE ns.nspname = 'public'
           AND 'jejak_app'::regrole = ANY (pol.polroles)
    LOOP
        IF p.qual IS NOT NULL AND p.qual LIKE '%app_tenant_id()%' AND p.qual NOT LIKE '%app_is_member()%' THEN
            EXECUTE format('ALTER POLICY %I ON public.%I USING ((%s) AND (SELECT app_is_member()))', p.polname, p.relname, p.qual);
            n := n + 1;
        END IF;
        IF p.wcheck IS NOT NULL AND p.wcheck LIKE '%app_tenant_id()%' AND p.wcheck NOT LIKE '%app_is_member()%' THEN
            EXECUTE format('ALTER POLICY %I ON public.%I WITH CHECK ((%s) AND (SELECT app_is_member()))', p.polname, p.relname, p.wcheck);
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION app_enforce_membership() FROM PUBLIC, jejak_app, jejak_system;

SELECT app_enforce_membership();
