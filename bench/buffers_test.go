package main

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

// The buffers family's capture records each statement with the tenant and
// user its transaction was scoped to, however the database package sends
// it: InTenantUserTx (BEGIN and the scope in one simple statement, ids
// written in), ReadTenant (the scope and one statement in a pipeline),
// ReadTenantAll (several statements after the scope); and a statement after
// them, outside any scope, has none.
func TestQueryCaptureReadsEveryScope(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	login, err := database.LoginURL(ctx, db.URL, database.AppRole)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := database.PoolConfig(login, database.AppRole, 1)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var qs []capturedQuery
	cfg.ConnConfig.Tracer = &queryCapture{role: database.AppRole, mu: &mu, qs: &qs,
		scope: map[*pgx.Conn][2]string{}, inTx: map[*pgx.Conn]bool{}}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	one := func(sql string) database.Read {
		return func(q database.Querier) error {
			var s string
			return q.QueryRow(ctx, sql).Scan(&s)
		}
	}
	if err := database.InTenantUserTx(ctx, pool, 7, 9, func(tx pgx.Tx) error { return one("SELECT 'tx'")(tx) }); err != nil {
		t.Fatal(err)
	}
	if err := database.ReadTenant(ctx, pool, 8, one("SELECT 'read'")); err != nil {
		t.Fatal(err)
	}
	if err := database.ReadTenantAll(ctx, pool, 5, one("SELECT 'all'"), one("SELECT 'all'")); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "SELECT 'after'"); err != nil {
		t.Fatal(err)
	}

	want := []capturedQuery{
		{sql: "SELECT 'tx'", tenant: "7", user: "9"},
		{sql: "SELECT 'read'", tenant: "8"},
		{sql: "SELECT 'all'", tenant: "5"},
		{sql: "SELECT 'all'", tenant: "5"},
		{sql: "SELECT 'after'"},
	}
	if len(qs) != len(want) {
		t.Fatalf("captured %+v, want %+v", qs, want)
	}
	for i, q := range qs {
		if q.sql != want[i].sql || q.tenant != want[i].tenant || q.user != want[i].user || q.role != database.AppRole {
			t.Fatalf("statement %d captured as %+v, want %+v", i, q, want[i])
		}
	}
}
