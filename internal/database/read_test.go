package database_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/reqctx"
)

// TestReadTenantScopesEachStatementInOneRoundTrip: every statement of a
// tenant read is one pipeline with its scoping (no BEGIN, no COMMIT), sees
// the tenant and the signed-in viewer, and leaves the pooled connection
// carrying neither; FreshPlans' statements are planned for their
// parameters; a failed statement leaves the connection usable.
func TestReadTenantScopesEachStatementInOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, tr := tripPool(t, 1) // every read below runs on one connection
	const settingsSQL = "SELECT current_setting('app.tenant_id', true), current_setting('app.user_id', true), " +
		"current_setting('plan_cache_mode')"
	type settings struct{ tenant, user, plans string }
	read := func(q database.Querier) (s settings) {
		t.Helper()
		if err := q.QueryRow(ctx, settingsSQL).Scan(&s.tenant, &s.user, &s.plans); err != nil {
			t.Fatal(err)
		}
		return s
	}
	viewer := reqctx.WithViewer(ctx, &reqctx.Viewer{UserID: 7})
	trips := tr.trips.Load()
	err := database.ReadTenant(viewer, pool, 42, func(q database.Querier) error {
		if s := read(q); s != (settings{"42", "7", "auto"}) {
			t.Errorf("first statement saw %+v, want tenant 42, user 7, plans auto", s)
		}
		if s := read(database.FreshPlans(q)); s != (settings{"42", "7", "force_custom_plan"}) {
			t.Errorf("fresh-plan statement saw %+v, want tenant 42, user 7, custom plans", s)
		}
		rows, err := q.Query(ctx, "SELECT g FROM generate_series(1, 3) g WHERE current_setting('app.tenant_id') = '42'")
		if err != nil {
			return err
		}
		ns, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil || len(ns) != 3 {
			t.Errorf("rows %v, %v; want three", ns, err)
		}
		if err := q.QueryRow(ctx, "SELECT 1 WHERE false").Scan(new(int)); !errors.Is(err, pgx.ErrNoRows) {
			t.Errorf("a row from nothing: %v, want pgx.ErrNoRows", err)
		}
		tag, err := q.Exec(ctx, "SELECT 1")
		if err != nil || tag.String() != "SELECT 1" {
			t.Errorf("exec: %q, %v", tag, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := tr.trips.Load() - trips; n != 5 {
		t.Errorf("five statements took %d round trips, want 5", n)
	}
	if s := read(pool); s != (settings{"", "", "auto"}) {
		t.Errorf("after the read the connection carries %+v", s)
	}

	// A failed statement fails the read; its pipeline is over, and the
	// connection serves the next read.
	err = database.ReadTenant(ctx, pool, 43, func(q database.Querier) error {
		_, err := q.Exec(ctx, "SELECT 1/0")
		return err
	})
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "22012" {
		t.Fatalf("division by zero: %v", err)
	}
	err = database.ReadTenant(ctx, pool, 43, func(q database.Querier) error {
		if s := read(q); s != (settings{"43", "", "auto"}) {
			t.Errorf("after a failure the next read saw %+v, want tenant 43 alone", s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := database.ReadTenant(ctx, pool, 0, func(database.Querier) error { return nil }); err == nil {
		t.Fatal("tenant id 0 accepted")
	}
}

// TestReadTenantAllSendsEveryReadInOnePipeline: the statements of several
// reads (and a read that sends none) go out in one pipeline with the
// scoping, each read gets its own results, one read's fresh plans apply to
// all; a failed statement fails the reads, a second statement from one
// read is refused, a panicking read panics in the caller once the others
// are done, and after each the connection serves the next read.
func TestReadTenantAllSendsEveryReadInOnePipeline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, tr := tripPool(t, 1) // every read below runs on one connection
	type seen struct {
		n                   int32
		tenant, user, plans string
	}
	const sql = "SELECT $1::int, current_setting('app.tenant_id', true), current_setting('app.user_id', true), " +
		"current_setting('plan_cache_mode')"
	got := make([]seen, 3)
	read := func(i int, fresh bool) func(database.Querier) error {
		return func(q database.Querier) error {
			if fresh {
				q = database.FreshPlans(q)
			}
			s := &got[i]
			return q.QueryRow(ctx, sql, i).Scan(&s.n, &s.tenant, &s.user, &s.plans)
		}
	}
	none := func(database.Querier) error { return nil }
	viewer := reqctx.WithViewer(ctx, &reqctx.Viewer{UserID: 7})
	trips := tr.trips.Load()
	if err := database.ReadTenantAll(viewer, pool, 42, read(0, false), none, read(1, false), read(2, false)); err != nil {
		t.Fatal(err)
	}
	if n := tr.trips.Load() - trips; n != 1 {
		t.Errorf("three reads took %d round trips, want 1", n)
	}
	for i, s := range got {
		if s != (seen{int32(i), "42", "7", "auto"}) {
			t.Errorf("read %d saw %+v", i, s)
		}
	}
	if err := database.ReadTenantAll(ctx, pool, 43, read(0, false), read(1, true)); err != nil {
		t.Fatal(err)
	}
	for i, s := range got[:2] {
		if s != (seen{int32(i), "43", "", "force_custom_plan"}) {
			t.Errorf("with fresh plans, read %d saw %+v", i, s)
		}
	}

	failing := func(q database.Querier) error {
		_, err := q.Exec(ctx, "SELECT 1/0")
		return err
	}
	err := database.ReadTenantAll(ctx, pool, 42, read(0, false), failing, read(1, false))
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "22012" {
		t.Fatalf("division by zero: %v", err)
	}
	twice := func(q database.Querier) error {
		if _, err := q.Exec(ctx, "SELECT 1"); err != nil {
			return err
		}
		_, err := q.Exec(ctx, "SELECT 2")
		return err
	}
	if err := database.ReadTenantAll(ctx, pool, 42, twice, read(0, false)); err == nil {
		t.Fatal("a read's second statement was accepted")
	}
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the read's panic", p)
			}
		}()
		got[0] = seen{}
		_ = database.ReadTenantAll(ctx, pool, 44, read(0, false), func(database.Querier) error { panic("boom") })
		t.Fatal("the read's panic did not reach the caller")
	}()
	if got[0] != (seen{0, "44", "", "auto"}) {
		t.Errorf("beside a panicking read, the other saw %+v", got[0])
	}
	if err := database.ReadTenantAll(ctx, pool, 45, read(0, false)); err != nil || got[0].tenant != "45" {
		t.Fatalf("after all that the connection served %+v, %v", got[0], err)
	}
	if s := func() (s seen) {
		if err := pool.QueryRow(ctx, sql, 9).Scan(&s.n, &s.tenant, &s.user, &s.plans); err != nil {
			t.Fatal(err)
		}
		return s
	}(); s != (seen{9, "", "", "auto"}) {
		t.Errorf("after the reads the connection carries %+v", s)
	}
}

// TestReadAllSendsUnscopedReadsInOnePipeline: ReadAll is ReadTenantAll
// without the scoping: one pipeline, no tenant set, fresh plans on asking.
func TestReadAllSendsUnscopedReadsInOnePipeline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, tr := tripPool(t, 1) // every read below runs on one connection
	const sql = "SELECT $1::int, coalesce(current_setting('app.tenant_id', true), ''), current_setting('plan_cache_mode')"
	type seen struct {
		n             int32
		tenant, plans string
	}
	got := make([]seen, 2)
	read := func(i int, fresh bool) func(database.Querier) error {
		return func(q database.Querier) error {
			if fresh {
				q = database.FreshPlans(q)
			}
			return q.QueryRow(ctx, sql, i).Scan(&got[i].n, &got[i].tenant, &got[i].plans)
		}
	}
	for _, fresh := range []bool{false, true} {
		want := "auto"
		if fresh {
			want = "force_custom_plan"
		}
		trips := tr.trips.Load()
		if err := database.ReadAll(ctx, pool, read(0, false), read(1, fresh)); err != nil {
			t.Fatal(err)
		}
		if n := tr.trips.Load() - trips; n != 1 {
			t.Errorf("fresh=%v: two reads took %d round trips, want 1", fresh, n)
		}
		for i, s := range got {
			if s != (seen{int32(i), "", want}) {
				t.Errorf("fresh=%v: read %d saw %+v", fresh, i, s)
			}
		}
	}
	var plans string
	if err := pool.QueryRow(ctx, "SELECT current_setting('plan_cache_mode')").Scan(&plans); err != nil || plans != "auto" {
		t.Fatalf("after the reads the connection plans %q (%v)", plans, err)
	}
}
