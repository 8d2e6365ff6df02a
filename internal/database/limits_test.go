package database_test

import (
	"context"
	"testing"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

// Both pools' connections carry a statement timeout, an idle-in-
// transaction timeout and the planner's price of a cached page read
// through an index; a URL that sets its own keeps it.
func TestPoolsSetSessionLimits(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		stmt, idle string
		get        func(string) (string, error)
	}{
		{"app", "15s", "30s", func(n string) (v string, err error) {
			err = db.App.QueryRow(ctx, "SELECT current_setting($1)", n).Scan(&v)
			return
		}},
		{"system", "1min", "1min", func(n string) (v string, err error) {
			err = db.System.QueryRow(ctx, "SELECT current_setting($1)", n).Scan(&v)
			return
		}},
	} {
		stmt, err := tc.get("statement_timeout")
		if err != nil || stmt != tc.stmt {
			t.Fatalf("%s pool statement_timeout = %q (%v), want %q", tc.name, stmt, err, tc.stmt)
		}
		idle, err := tc.get("idle_in_transaction_session_timeout")
		if err != nil || idle != tc.idle {
			t.Fatalf("%s pool idle_in_transaction_session_timeout = %q (%v), want %q", tc.name, idle, err, tc.idle)
		}
		rpc, err := tc.get("random_page_cost")
		if err != nil || rpc != "1.1" {
			t.Fatalf("%s pool random_page_cost = %q (%v), want 1.1", tc.name, rpc, err)
		}
	}
	p, err := database.Open(ctx, db.URL+"&statement_timeout=2500&random_page_cost=4", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var v string
	if err := p.QueryRow(ctx, "SHOW statement_timeout").Scan(&v); err != nil || v != "2500ms" {
		t.Fatalf("URL's statement_timeout: %q %v", v, err)
	}
	if err := p.QueryRow(ctx, "SHOW random_page_cost").Scan(&v); err != nil || v != "4" {
		t.Fatalf("URL's random_page_cost: %q %v", v, err)
	}
}
