package audit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
)

// TestAppRoleSeesOnlyItsTenant checks row-level security on the audit
// tables from jejak_app's side.
func TestAppRoleSeesOnlyItsTenant(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	t1, t2 := f.tenant(t, "melati"), f.tenant(t, "senja")
	f.recordN(t, t1, 3)
	f.recordN(t, t2, 4)
	f.seal(t)

	count := func(tx pgx.Tx, table string) int {
		t.Helper()
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		return n
	}
	err := database.InTenantTx(ctx, f.db.App, t1, func(tx pgx.Tx) error {
		// No WHERE tenant_id at all: RLS still shows only tenant 1.
		if n := count(tx, "audit_events"); n != 3 {
			t.Errorf("tenant 1 sees %d events, want 3", n)
		}
		for table, want := range map[string]int{"audit_leaves": 3, "audit_trees": 1, "audit_checkpoints": 1} {
			if n := count(tx, table); n != want {
				t.Errorf("tenant 1 sees %d rows of %s, want %d", n, table, want)
			}
		}
		// Asking for tenant 2 by id finds nothing.
		p, err := audit.Timeline(ctx, tx, t2, audit.Filter{}, 0, 50)
		if err != nil || len(p.Rows) != 0 {
			t.Errorf("tenant 1 reading tenant 2's timeline: %d events, %v", len(p.Rows), err)
		}
		res, err := audit.Search(ctx, tx, audit.SearchQuery{JobID: ptr(int64(1))}, 0, 10)
		if err != nil || len(res.Rows) != 0 {
			t.Errorf("search leaked: %+v %v", res, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Writes aimed at another tenant, and rewrites, fail.
	writes := []struct{ name, sql, want string }{
		{"insert other tenant", `INSERT INTO audit_unsealed (tenant_id, actor_kind, action, entity, entity_id, occurred_at)
			VALUES ($1, 'system', 'x.y', 'e', '1', now())`, "row-level security"},
		{"insert a sealed event", `INSERT INTO audit_sealed (tenant_id, id, actor_kind, action, entity, entity_id, occurred_at)
			VALUES (app_tenant_id(), 99, 'system', 'x.y', 'e', '1', now())`, "permission denied"},
		{"update", `UPDATE audit_events SET action = 'x.z' WHERE tenant_id = $1 OR true`, "permission denied"},
		{"delete", `DELETE FROM audit_events WHERE tenant_id = $1 OR true`, "permission denied"},
		{"update sealed", `UPDATE audit_sealed SET action = 'x.z' WHERE tenant_id = $1 OR true`, "permission denied"},
		{"update unsealed", `UPDATE audit_unsealed SET action = 'x.z' WHERE tenant_id = $1 OR true`, "permission denied"},
		{"delete sealed", `DELETE FROM audit_sealed WHERE tenant_id = $1 OR true`, "permission denied"},
		{"truncate", `TRUNCATE audit_sealed`, "permission denied"},
		{"truncate unsealed", `TRUNCATE audit_unsealed`, "permission denied"},
		{"seal own event", `INSERT INTO audit_leaves (tenant_id, seq, event_id, hashes) VALUES (app_tenant_id(), 99, 1, sha256('x'))`, "permission denied"},
		{"rewind own tree", `UPDATE audit_trees SET size = 0`, "permission denied"},
		{"forge a checkpoint", `INSERT INTO audit_checkpoints (tenant_id, size, root, note) VALUES (app_tenant_id(), 99, sha256('x'), 'x')`, "permission denied"},
		{"unqueue an event", `DELETE FROM audit_unsealed`, "permission denied"},
		{"delete a leaf", `DELETE FROM audit_leaves`, "permission denied"},
		{"head of other tenant", `INSERT INTO audit_heads (tenant_id, seq, hash) VALUES ($1, 0, sha256('x'))`, "permission denied"},
	}
	for _, w := range writes {
		err := database.InTenantTx(ctx, f.db.App, t1, func(tx pgx.Tx) error {
			var args []any
			if strings.Contains(w.sql, "$1") {
				args = append(args, t2)
			}
			_, err := tx.Exec(ctx, w.sql, args...)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), w.want) {
			t.Errorf("%s: err = %v, want %q", w.name, err, w.want)
		}
	}
	// Recording for another tenant inside tenant 1's transaction fails.
	err = database.InTenantTx(ctx, f.db.App, t1, func(tx pgx.Tx) error {
		_, err := f.rec.Record(ctx, tx, audit.Event{TenantID: t2, ActorKind: audit.ActorSystem, Action: "x.y", Entity: "e"})
		return err
	})
	if err == nil {
		t.Error("tenant 1's transaction recorded an event for tenant 2")
	}
	if n := f.countAdmin(t, t2); n != 4 {
		t.Errorf("tenant 2 has %d events, want 4", n)
	}

	// No tenant set: nothing is visible.
	for _, table := range []string{"audit_events", "audit_leaves", "audit_trees", "audit_checkpoints"} {
		var n int
		if err := f.db.App.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != 0 {
			t.Errorf("unscoped jejak_app sees %d rows of %s (%v), want 0", n, table, err)
		}
	}
	// The system pool sees every tenant.
	var n int
	if err := f.db.System.QueryRow(ctx, "SELECT count(*) FROM audit_events").Scan(&n); err != nil || n != 7 {
		t.Errorf("system pool sees %d events (%v), want 7", n, err)
	}
	// Even the sealer's own role cannot rewrite what it sealed.
	for _, sql := range []string{`UPDATE audit_leaves SET seq = seq`, `DELETE FROM audit_checkpoints`, `UPDATE audit_trees SET size = 0`, `TRUNCATE audit_leaves`} {
		if _, err := f.db.System.Exec(ctx, sql); err == nil {
			t.Errorf("jejak_system ran %q", sql)
		}
	}
}
