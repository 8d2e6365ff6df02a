package database_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
)

// TestTenantTxScopesInTheFirstRoundTrip: on a pool, a tenant transaction
// with one query costs two round trips (BEGIN, the scoping and the query
// in one pipeline, then COMMIT), not three or four; inside it both
// settings hold, and after it the pooled connection carries neither.
// Nested in a transaction it still scopes (a savepoint and a separate
// set_config).
func TestTenantTxScopesInTheFirstRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, tr := tripPool(t, 1)
	settings := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) (tenant, user string) {
		t.Helper()
		if err := q.QueryRow(ctx, "SELECT current_setting('app.tenant_id', true), current_setting('app.user_id', true)").
			Scan(&tenant, &user); err != nil {
			t.Fatal(err)
		}
		return tenant, user
	}
	before := tr.trips.Load()
	err := database.InTenantUserTx(ctx, pool, 42, 7, func(tx pgx.Tx) error {
		if tenant, user := settings(tx); tenant != "42" || user != "7" {
			t.Errorf("inside: tenant %q user %q, want 42 and 7", tenant, user)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := tr.trips.Load() - before; n != 2 {
		t.Errorf("a tenant transaction with one query took %d round trips, want 2", n)
	}
	if tenant, user := settings(pool); tenant != "" || user != "" {
		t.Errorf("after commit the connection carries tenant %q user %q", tenant, user)
	}
	err = database.InTx(ctx, pool, func(outer pgx.Tx) error {
		return database.InTenantUserTx(ctx, outer, 43, 0, func(tx pgx.Tx) error {
			if tenant, user := settings(tx); tenant != "43" || user != "" {
				t.Errorf("nested: tenant %q user %q, want 43 and none", tenant, user)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}
