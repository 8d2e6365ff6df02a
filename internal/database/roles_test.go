package database_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestTenantPoolCannotLeaveItsRole: the tenant pool logs in as its own
// role, so RESET ROLE lands on that same role (no extra rights), SET ROLE
// to the system or owner role is refused, and session_replication_role
// (which would switch off the audit triggers) cannot be set.
func TestTenantPoolCannotLeaveItsRole(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var tenantA, tenantB int64
	for i, dst := range []*int64{&tenantA, &tenantB} {
		if err := db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id",
			fmt.Sprintf("t%d", i)).Scan(dst); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Admin.Exec(ctx, "INSERT INTO projects (tenant_id, name) VALUES ($1, 'p')", *dst); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := db.App.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "RESET ROLE"); err != nil {
		t.Fatalf("RESET ROLE: %v", err)
	}
	var user string
	var super bool
	if err := conn.QueryRow(ctx, "SELECT current_user, usesuper FROM pg_user WHERE usename = current_user").Scan(&user, &super); err != nil {
		t.Fatal(err)
	}
	if user != database.AppLogin || super {
		t.Fatalf("after RESET ROLE: %s super=%v, want %s and no superuser", user, super, database.AppLogin)
	}
	// Still under row-level security: tenant A's scope sees only A.
	var n int
	err = database.InTenantTx(ctx, conn, tenantA, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT count(*) FROM projects").Scan(&n)
	})
	if err != nil || n != 1 {
		t.Fatalf("after RESET ROLE, tenant A sees %d projects (%v), want 1", n, err)
	}
	for _, role := range []string{"jejak_system", "jejak_owner", "postgres"} {
		if _, err := conn.Exec(ctx, "SET ROLE "+role); err == nil {
			t.Errorf("SET ROLE %s accepted on the tenant pool", role)
		}
	}
	if _, err := conn.Exec(ctx, "SET session_replication_role = replica"); err == nil {
		t.Fatal("session_replication_role set on the tenant pool (audit triggers would be off)")
	}
	// The system pool cannot either.
	if _, err := db.System.Exec(ctx, "SET session_replication_role = replica"); err == nil {
		t.Fatal("session_replication_role set on the system pool")
	}
}

// TestOpenRefusesUnsafeRoles: a pool whose role is a superuser, bypasses
// row-level security, owns tables, or is not a member of its group is
// refused at start.
func TestOpenRefusesUnsafeRoles(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The URL's own superuser, given as an explicit tenant-pool URL.
	if p, err := database.OpenExplicit(ctx, db.URL, database.AppRole, 2); !errors.Is(err, database.ErrUnsafeRole) {
		if p != nil {
			p.Close()
		}
		t.Fatalf("superuser accepted as the tenant pool: %v", err)
	}
	cases := map[string]string{
		"bypassrls": "CREATE ROLE %s LOGIN BYPASSRLS IN ROLE jejak_app",
		"owner":     "CREATE ROLE %s LOGIN IN ROLE jejak_app, jejak_owner",
		"system":    "CREATE ROLE %s LOGIN IN ROLE jejak_app, jejak_system",
		"outsider":  "CREATE ROLE %s LOGIN",
	}
	for name, ddl := range cases {
		role := "jejak_unsafe_" + name + "_" + u.Path[len(u.Path)-8:]
		if _, err := db.Admin.Exec(ctx, fmt.Sprintf(ddl, role)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(func() { _, _ = db.Admin.Exec(context.Background(), "DROP ROLE "+role) })
		v := *u
		v.User = url.User(role)
		p, err := database.OpenExplicit(ctx, v.String(), database.AppRole, 2)
		if !errors.Is(err, database.ErrUnsafeRole) {
			if p != nil {
				p.Close()
			}
			t.Errorf("%s role accepted as the tenant pool: %v", name, err)
		}
	}
	// The derived login role itself is accepted.
	p, err := database.OpenExplicit(ctx, mustLoginURL(t, db.URL), database.AppRole, 2)
	if err != nil {
		t.Fatalf("derived login role refused: %v", err)
	}
	p.Close()
}

func mustLoginURL(t *testing.T, admin string) string {
	t.Helper()
	u, err := database.LoginURL(context.Background(), admin, database.AppRole)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestRLSRequiresMembership: with the web's membership check out of the
// way, a signed-in stranger who scopes a transaction to another tenant
// reads nothing and writes nothing: row-level security itself checks the
// membership. A member reads their tenant; a disabled member reads nothing.
func TestRLSRequiresMembership(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var tenant, member, stranger int64
	if err := db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ('acme', 'Acme') RETURNING id").Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	for i, dst := range []*int64{&member, &stranger} {
		if err := db.Admin.QueryRow(ctx, "INSERT INTO users (email, name, password_hash) VALUES ($1, 'u', 'x') RETURNING id",
			fmt.Sprintf("u%d@example.com", i)).Scan(dst); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Admin.Exec(ctx, `INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'member');
		`, tenant, member); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, "INSERT INTO projects (tenant_id, name) VALUES ($1, 'secret')", tenant); err != nil {
		t.Fatal(err)
	}
	count := func(ctx context.Context) (int, error) {
		var n int
		err := database.InTenantTx(ctx, db.App, tenant, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, "SELECT (SELECT count(*) FROM projects) + (SELECT count(*) FROM memberships)").Scan(&n)
		})
		return n, err
	}
	as := func(id int64) context.Context {
		return reqctx.WithViewer(ctx, &reqctx.Viewer{UserID: id})
	}
	if n, err := count(as(member)); err != nil || n != 2 {
		t.Fatalf("member sees %d rows (%v), want 2", n, err)
	}
	if n, err := count(as(stranger)); err != nil || n != 0 {
		t.Fatalf("stranger sees %d rows (%v), want 0", n, err)
	}
	err := database.InTenantUserTx(ctx, db.App, tenant, stranger, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO projects (tenant_id, name) VALUES ($1, 'planted')", tenant)
		return err
	})
	if err == nil {
		t.Fatal("stranger inserted into another tenant's projects")
	}
	if _, err := db.Admin.Exec(ctx, "UPDATE users SET active = false WHERE id = $1", member); err != nil {
		t.Fatal(err)
	}
	if n, err := count(as(member)); err != nil || n != 0 {
		t.Fatalf("disabled member sees %d rows (%v), want 0", n, err)
	}
	// The check is one InitPlan per statement, not a call per row.
	var full string
	err = database.InTenantUserTx(ctx, db.App, tenant, member, func(tx pgx.Tx) error {
		r, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) SELECT * FROM projects")
		if err != nil {
			return err
		}
		lines, err := pgx.CollectRows(r, pgx.RowTo[string])
		for _, l := range lines {
			full += l + "\n"
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(full, "InitPlan") {
		t.Fatalf("membership check is not an InitPlan:\n%s", full)
	}
	// And a PL/pgSQL function, which keeps its statement's plan for the
	// session: a SQL function's body (never inlined here, being a security
	// definer) is planned again on every statement of every tenant
	// transaction.
	var lang string
	if err := db.Admin.QueryRow(ctx, `SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		WHERE p.oid = 'public.app_is_member()'::regprocedure`).Scan(&lang); err != nil || lang != "plpgsql" {
		t.Fatalf("app_is_member is written in %q (%v), want plpgsql", lang, err)
	}
}

// TestNoFunctionIsPlannedPerCall: PostgreSQL 15 parses and plans the body
// of a SQL function it cannot inline on every call. One that carries its
// own settings or runs as its owner is never inlined, so such functions are
// written in PL/pgSQL, which keeps its plans for the session; the policies'
// membership check and the NOTIFY rule run in nearly every transaction.
// The one SQL function on the write path is inlined where it is called.
func TestNoFunctionIsPlannedPerCall(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	rows, err := db.Admin.Query(ctx, `SELECT p.oid::regprocedure::text FROM pg_proc p
		JOIN pg_language l ON l.oid = p.prolang JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = 'public' AND l.lanname = 'sql' AND (p.prosecdef OR p.proconfig IS NOT NULL)`)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("SQL functions that cannot be inlined (own settings or security definer): %v", bad)
	}
	var plan []string
	err = database.InTx(ctx, db.System, func(tx pgx.Tx) error {
		r, err := tx.Query(ctx, "EXPLAIN (VERBOSE, COSTS OFF) SELECT stats_shard()")
		if err == nil {
			plan, err = pgx.CollectRows(r, pgx.RowTo[string])
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(plan, "\n"), "pg_backend_pid()") {
		t.Fatalf("stats_shard() is not inlined for the system role: %s", plan)
	}
}

// TestTenantRoleCannotGrantStaff: through the tenant pool a user can be
// created and renamed, but nobody can give themselves a staff role or
// re-enable a disabled account.
func TestTenantRoleCannotGrantStaff(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var id int64
	if err := db.App.QueryRow(ctx, "INSERT INTO users (email, name, password_hash) VALUES ('a@example.com', 'A', 'x') RETURNING id").Scan(&id); err != nil {
		t.Fatalf("tenant role creating a plain user: %v", err)
	}
	if _, err := db.App.Exec(ctx, "UPDATE users SET name = 'B' WHERE id = $1", id); err != nil {
		t.Fatalf("tenant role renaming a user: %v", err)
	}
	for _, sql := range []string{
		"UPDATE users SET staff_role = 'admin' WHERE id = $1",
		"UPDATE users SET active = false WHERE id = $1",
		"DELETE FROM users WHERE id = $1",
	} {
		if _, err := db.App.Exec(ctx, sql, id); err == nil {
			t.Errorf("tenant role ran %q", sql)
		}
	}
	if _, err := db.App.Exec(ctx, "INSERT INTO users (email, name, password_hash, staff_role) VALUES ('b@example.com', 'B', 'x', 'admin')"); err == nil {
		t.Error("tenant role created a staff user")
	}
}
