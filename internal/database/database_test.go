package database_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

func TestMigrationsCreateRestrictedAppRole(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()

	var super, bypass, canLogin bool
	err := db.Admin.QueryRow(ctx, `SELECT rolsuper, rolbypassrls, rolcreaterole FROM pg_roles WHERE rolname = 'jejak_app'`).Scan(&super, &bypass, &canLogin)
	if err != nil {
		t.Fatalf("look up jejak_app: %v", err)
	}
	if super || bypass || canLogin {
		t.Fatalf("jejak_app must be plain: super=%v bypassrls=%v createrole=%v", super, bypass, canLogin)
	}

	rows, err := db.Admin.Query(ctx, `SELECT c.relname, pg_get_userbyid(c.relowner)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'S', 'v', 'm')`)
	if err != nil {
		t.Fatalf("list relations: %v", err)
	}
	owners, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Rel, Owner string }])
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	if len(owners) < 8 {
		t.Fatalf("expected the core tables, found %d relations", len(owners))
	}
	for _, o := range owners {
		if o.Owner != "jejak_owner" {
			t.Errorf("%s is owned by %s, want jejak_owner", o.Rel, o.Owner)
		}
	}

	var current string
	if err := db.App.QueryRow(ctx, "SELECT current_user").Scan(&current); err != nil {
		t.Fatalf("current_user: %v", err)
	}
	if current != database.AppLogin {
		t.Fatalf("app pool runs as %q, want %s", current, database.AppLogin)
	}
	// The app role can use tables but not change their shape.
	if _, err := db.App.Exec(ctx, "ALTER TABLE tenants ADD COLUMN x int"); err == nil {
		t.Fatal("jejak_app altered a table it must not own")
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	if err := database.Migrate(context.Background(), db.URL); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
}

func TestInTenantTxScopesSettingToTransaction(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	conn, err := db.App.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var inside string
	err = database.InTenantTx(ctx, conn, 42, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT current_setting('app.tenant_id')").Scan(&inside)
	})
	if err != nil || inside != "42" {
		t.Fatalf("inside tx: %q, %v", inside, err)
	}
	var after string
	if err := conn.QueryRow(ctx, "SELECT coalesce(current_setting('app.tenant_id', true), '')").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != "" {
		t.Fatalf("tenant leaked out of the transaction onto the pooled connection: %q", after)
	}
	if err := database.InTenantTx(ctx, conn, 0, func(pgx.Tx) error { return nil }); err == nil {
		t.Fatal("tenant id 0 accepted")
	}
}
