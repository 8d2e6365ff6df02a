package main

import (
	"context"
	"strings"
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
// them, outside any scope, has none. Statements sent through FreshPlans
// (planned for their arguments each time) are told from those the app
// runs prepared, whose generic plan the family also explains.
func TestQueryCaptureReadsEveryScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	var qs []capturedQuery
	pool := appPool(t, newQueryCapture(database.AppRole, &mu, &qs))

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
	fresh := func(read database.Read) database.Read {
		return func(q database.Querier) error { return read(database.FreshPlans(q)) }
	}
	if err := database.ReadTenantAll(ctx, pool, 6, one("SELECT 'pipeline'"), fresh(one("SELECT 'pipeline'"))); err != nil {
		t.Fatal(err)
	}
	if err := database.InTenantUserTx(ctx, pool, 6, 0, func(tx pgx.Tx) error {
		return fresh(one("SELECT 'fresh in tx'"))(tx)
	}); err != nil {
		t.Fatal(err)
	}
	if err := database.ReadAll(ctx, pool, fresh(one("SELECT 'unscoped fresh'"))); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "SELECT 'after'"); err != nil {
		t.Fatal(err)
	}

	want := []capturedQuery{
		{sql: "SELECT 'tx'", tenant: "7", user: "9", cached: true},
		{sql: "SELECT 'read'", tenant: "8", cached: true},
		{sql: "SELECT 'all'", tenant: "5", cached: true},
		{sql: "SELECT 'all'", tenant: "5", cached: true},
		// One plan mode per pipeline: a fresh statement makes all fresh.
		{sql: "SELECT 'pipeline'", tenant: "6"},
		{sql: "SELECT 'pipeline'", tenant: "6"},
		{sql: "SELECT 'fresh in tx'", tenant: "6"},
		// Its pipeline's lead asks for fresh plans and is not a statement
		// of the page.
		{sql: "SELECT 'unscoped fresh'"},
		{sql: "SELECT 'after'", cached: true},
	}
	if len(qs) != len(want) {
		t.Fatalf("captured %+v, want %+v", qs, want)
	}
	for i, q := range qs {
		if q.sql != want[i].sql || q.tenant != want[i].tenant || q.user != want[i].user || q.cached != want[i].cached || q.role != database.AppRole {
			t.Fatalf("statement %d captured as %+v, want %+v", i, q, want[i])
		}
	}
}

// A statement the app runs prepared is explained on its custom plan and
// on its generic one (its arguments passed as literals of the prepared
// statement's types), statement after statement on one connection; one it plans
// fresh only on the custom plan.
func TestExplainGenericPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := &buffersEnv{explainPools: map[string]*pgxpool.Pool{database.AppRole: appPool(t, nil)}}
	q := capturedQuery{role: database.AppRole, tenant: "1",
		sql:  "-- name: Probe :many\nSELECT id FROM audit_events WHERE tenant_id = $1 AND id < $2 AND action = ANY($3) ORDER BY id DESC LIMIT 5",
		args: []any{int64(1), int64(1 << 40), []string{"a", "b's"}}, cached: true}
	for _, limit := range []string{"5", "6"} {
		// Another statement each time, on the same connection.
		q.sql = q.sql[:strings.LastIndex(q.sql, " ")+1] + limit
		pl, err := b.explain(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if pl.name != "Probe" || pl.generic < 0 || len(pl.scans) == 0 {
			t.Fatalf("explained %+v; want the custom plan's scans and a generic plan's buffers", pl)
		}
	}
	q.cached = false
	if pl, err := b.explain(ctx, q); err != nil || pl.generic != -1 {
		t.Fatalf("a freshly planned statement explained as %+v (%v); want no generic plan", pl, err)
	}

	// The plan is the generic one: its conditions name the parameters
	// where a custom plan has the values.
	tx, err := b.explainPools[database.AppRole].Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	top, _, err := explainGeneric(ctx, tx, capturedQuery{sql: "SELECT id FROM users WHERE id > $1 AND email <> $2",
		args: []any{int64(0), "nobody@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	var conds []string
	for _, n := range testdb.PlanNodes(top) {
		for _, k := range []string{"Index Cond", "Filter"} {
			if c, ok := n[k].(string); ok {
				conds = append(conds, c)
			}
		}
	}
	if got := strings.Join(conds, " "); !strings.Contains(got, "$1") || !strings.Contains(got, "$2") {
		t.Fatalf("conditions %q: want the generic plan's $1 and $2", got)
	}
}

// appPool is a one-connection pool of a fresh test database, logged in and
// configured as the app's tenant pool, traced by tracer (nil: none).
func appPool(t *testing.T, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
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
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
