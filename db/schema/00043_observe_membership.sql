-- +goose Up
-- Where the schema checks membership in row-level security (a tenant-facing
-- session sees a tenant's rows only while its user is a member), the
-- tenant policies of the observability tables created above get the same
-- check as every other tenant table. Idempotent: a policy that already has
-- it is left alone, and nothing happens where the check does not exist.
SET LOCAL ROLE jejak_owner;

-- +goose StatementBegin
DO $$
DECLARE p record;
BEGIN
    IF to_regprocedure('public.app_is_member()') IS NULL THEN
        RETURN;
    END IF;
    FOR p IN
        SELECT pol.polname, c.relname,
               pg_get_expr(pol.polqual, pol.polrelid) AS qual,
               pg_get_expr(pol.polwithcheck, pol.polrelid) AS wcheck
          FROM pg_policy pol
          JOIN pg_class c ON c.oid = pol.polrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public'
           AND c.relname IN ('job_traces', 'alert_principal_minute', 'outbox_traces')
           AND 'jejak_app'::regrole = ANY (pol.polroles)
    LOOP
        IF p.qual IS NOT NULL AND p.qual LIKE '%app_tenant_id()%' AND p.qual NOT LIKE '%app_is_member()%' THEN
            EXECUTE format('ALTER POLICY %I ON %I USING ((%s) AND (SELECT app_is_member()))', p.polname, p.relname, p.qual);
        END IF;
        IF p.wcheck IS NOT NULL AND p.wcheck LIKE '%app_tenant_id()%' AND p.wcheck NOT LIKE '%app_is_member()%' THEN
            EXECUTE format('ALTER POLICY %I ON %I WITH CHECK ((%s) AND (SELECT app_is_member()))', p.polname, p.relname, p.wcheck);
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd
