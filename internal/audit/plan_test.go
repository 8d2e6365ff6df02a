package audit_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
)

// The plain trail runs on one cached generic plan per connection, often
// made while a new tenant's trail is short. That plan must still reach
// each event's leaf through audit_leaves' (tenant_id, event_id) index: a
// plan that scans the tenant's leaves for every event on the page (what
// PostgreSQL chose here at its default random_page_cost) costs events ×
// leaves per page once the trail has grown, until the next ANALYZE.
func TestTimelineGenericPlanProbesLeaves(t *testing.T) {
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
	if _, err := f.db.Admin.Exec(ctx, "ANALYZE audit_events, audit_leaves, users"); err != nil {
		t.Fatal(err)
	}
	conn, err := f.db.App.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var plan string
	err = database.InTenantUserTx(ctx, conn, a, owner, func(tx pgx.Tx) error {
		page, err := audit.Timeline(ctx, tx, a, audit.Filter{}, 0, 50)
		if err != nil {
			return err
		}
		if len(page.Rows) != 50 || page.Rows[0].Seq == 0 {
			return fmt.Errorf("first page: %d events, first seq %d; want 50 sealed", len(page.Rows), page.Rows[0].Seq)
		}
		// The statement as the pool prepared it on this connection, and the
		// generic plan PostgreSQL caches for it.
		var name string
		if err := tx.QueryRow(ctx, `SELECT name FROM pg_prepared_statements
			WHERE statement LIKE '-- name: AuditEventTimelineAll %'`).Scan(&name); err != nil {
			return fmt.Errorf("the timeline's prepared statement: %w", err)
		}
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, fmt.Sprintf("EXPLAIN EXECUTE %s(%d, %d, 51)", pgx.Identifier{name}.Sanitize(), a, int64(math.MaxInt64)))
		if err != nil {
			return err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		plan = strings.Join(lines, "\n")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plan, "Seq Scan on audit_leaves") || !strings.Contains(plan, "audit_leaves_tenant_id_event_id_key") {
		t.Fatalf("the timeline's generic plan does not probe audit_leaves by event:\n%s", plan)
	}
}
