package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

// The plain trail runs on one cached generic plan per connection, often
// made while a new tenant's trail is short. That plan must read the page's
// leaves in one walk of audit_leaves' (tenant_id, event_id) index, however
// the tables grow: a plan that scans the tenant's leaves for every event
// (what PostgreSQL once chose for a join on a short trail) costs events ×
// leaves per page, and one index probe per event four pages each.
func TestTimelineGenericPlanReadsLeavesOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// Two tenants' short trails (200 and 100 events), sealed and analyzed.
	a, b := f.tenant(t, "melati"), f.tenant(t, "senja")
	owner := f.user(t, "budi@example.com", a)
	if _, err := audit.SeedScale(ctx, f.db.System, []int64{a, b}, 300, audit.SeedOptions{}); err != nil {
		t.Fatal(err)
	}
	f.seal(t)
	if _, err := f.db.Admin.Exec(ctx, "ANALYZE audit_sealed, audit_unsealed, audit_leaves, users"); err != nil {
		t.Fatal(err)
	}
	// Newer events, not sealed: the page shows them without a leaf.
	f.recordN(t, a, 5)
	conn, err := f.db.App.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var raw []byte
	err = database.InTenantUserTx(ctx, conn, a, owner, func(tx pgx.Tx) error {
		page, err := audit.Timeline(ctx, tx, a, audit.Filter{}, 0, 50)
		if err != nil {
			return err
		}
		if len(page.Rows) != 50 {
			return fmt.Errorf("first page: %d events, want 50", len(page.Rows))
		}
		for i, e := range page.Rows {
			if sealed := e.Seq != 0; sealed != (i >= 5) {
				return fmt.Errorf("event %d of the page (id %d): seq %d; want the 5 newest unsealed and the rest sealed", i, e.ID, e.Seq)
			}
		}
		// The statement as the pool prepared it on this connection, run on
		// the generic plan PostgreSQL caches for it.
		var name string
		if err := tx.QueryRow(ctx, `SELECT name FROM pg_prepared_statements
			WHERE statement LIKE '-- name: AuditEventTimelineAll %'`).Scan(&name); err != nil {
			return fmt.Errorf("the timeline's prepared statement: %w", err)
		}
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			return err
		}
		return tx.QueryRow(ctx, fmt.Sprintf("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE %s(%d, %d, 51)",
			pgx.Identifier{name}.Sanitize(), a, int64(math.MaxInt64))).Scan(&raw)
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []struct{ Plan map[string]any }
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		t.Fatalf("plan: %v", err)
	}
	var leaves []string
	for _, n := range testdb.PlanNodes(out[0].Plan) {
		if n["Relation Name"] == "audit_leaves" {
			leaves = append(leaves, fmt.Sprintf("%v on %v, %v loops", n["Node Type"], n["Index Name"], n["Actual Loops"]))
		}
	}
	if want := "Index Scan on audit_leaves_tenant_id_event_id_key, 1 loops"; len(leaves) != 1 || leaves[0] != want {
		t.Fatalf("audit_leaves read by %q; want one walk of the index (%s)\n%s", leaves, want, raw)
	}
}
