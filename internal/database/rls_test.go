package database_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/testdb"
)

// TestTenantTablesForceRowLevelSecurity reads the catalog, so it keeps
// guarding tables added later: every public table with a tenant_id column
// has row-level security enabled and forced, a policy for jejak_app that
// uses app_tenant_id(), and one for jejak_system; and neither application
// role is a superuser, bypasses RLS, or owns anything.
func TestTenantTablesForceRowLevelSecurity(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()

	rows, err := db.Admin.Query(ctx, `
		SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
		       EXISTS (SELECT 1 FROM pg_policy p
		               WHERE p.polrelid = c.oid
		                 AND 'jejak_app'::regrole = ANY (p.polroles)
		                 AND pg_get_expr(p.polqual, p.polrelid) LIKE '%app_tenant_id()%'
		                 AND pg_get_expr(p.polqual, p.polrelid) LIKE '%SELECT app_is_member()%'
		                 AND pg_get_expr(p.polwithcheck, p.polrelid) LIKE '%app_tenant_id()%'
		                 AND pg_get_expr(p.polwithcheck, p.polrelid) LIKE '%SELECT app_is_member()%'),
		       EXISTS (SELECT 1 FROM pg_policy p
		               WHERE p.polrelid = c.oid AND 'jejak_system'::regrole = ANY (p.polroles))
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_attribute a ON a.attrelid = c.oid
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
		  AND a.attname = 'tenant_id' AND NOT a.attisdropped
		ORDER BY c.relname`)
	if err != nil {
		t.Fatalf("list tenant tables: %v", err)
	}
	type table struct {
		Name                      string
		Enabled, Forced, App, Sys bool
	}
	tables, err := pgx.CollectRows(rows, pgx.RowToStructByPos[table])
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	seen := map[string]bool{}
	for _, tb := range tables {
		seen[tb.Name] = true
		if !tb.Enabled || !tb.Forced {
			t.Errorf("%s: row-level security enabled=%v forced=%v, want both", tb.Name, tb.Enabled, tb.Forced)
		}
		if !tb.App {
			t.Errorf("%s: no jejak_app policy on app_tenant_id() and (SELECT app_is_member()) for reads and writes", tb.Name)
		}
		if !tb.Sys {
			t.Errorf("%s: no jejak_system policy (the cross-tenant path)", tb.Name)
		}
	}
	// The check must actually have found the tenant tables.
	for _, name := range []string{"memberships", "projects", "audit_sealed", "audit_heads"} {
		if !seen[name] {
			t.Errorf("tenant table %s not found in the catalog", name)
		}
	}

	for _, role := range []string{"jejak_app", "jejak_system"} {
		var super, bypass bool
		var owned int
		err := db.Admin.QueryRow(ctx, `
			SELECT r.rolsuper, r.rolbypassrls,
			       (SELECT count(*) FROM pg_class c WHERE c.relowner = r.oid)
			     + (SELECT count(*) FROM pg_proc p WHERE p.proowner = r.oid)
			FROM pg_roles r WHERE r.rolname = $1`, role).Scan(&super, &bypass, &owned)
		if err != nil {
			t.Fatalf("look up %s: %v", role, err)
		}
		if super || bypass || owned != 0 {
			t.Errorf("%s: superuser=%v bypassrls=%v owns %d objects; want none", role, super, bypass, owned)
		}
		// Not a member of any role that could lift these limits.
		var inherits int
		err = db.Admin.QueryRow(ctx, `
			SELECT count(*) FROM pg_roles g
			WHERE pg_has_role($1, g.oid, 'MEMBER') AND g.rolname <> $1
			  AND (g.rolsuper OR g.rolbypassrls OR g.rolname IN ('jejak_owner', 'jejak_system', 'jejak_app'))`, role).Scan(&inherits)
		if err != nil {
			t.Fatalf("memberships of %s: %v", role, err)
		}
		if inherits != 0 {
			t.Errorf("%s is a member of a privileged or sibling role", role)
		}
	}
}
