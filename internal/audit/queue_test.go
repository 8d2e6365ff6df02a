package audit_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
)

// TestEveryWriterQueuesItsEvents: every path a writer takes (Record,
// Append, AppendMany, the large-data seed) puts its events in the
// sealer's queue, where readers see them at once, and a rolled back
// transaction leaves none; the sealer moves each into audit_sealed with
// its leaf, keeping its id.
func TestEveryWriterQueuesItsEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	ev := func(id string) audit.Event {
		return audit.Event{TenantID: tn, ActorKind: audit.ActorSystem, Action: "project.create", Entity: "project", EntityID: id}
	}
	inTx := func(t *testing.T, fn func(tx pgx.Tx) error) {
		t.Helper()
		if err := database.InTenantTx(ctx, f.db.App, tn, fn); err != nil {
			t.Fatal(err)
		}
	}

	f.record(t, ev("1"))
	inTx(t, func(tx pgx.Tx) error { return f.rec.Append(ctx, tx, ev("2")) })
	inTx(t, func(tx pgx.Tx) error { return f.rec.AppendMany(ctx, tx, []audit.Event{ev("3"), ev("4")}) })
	if _, err := audit.SeedScale(ctx, f.db.System, []int64{tn}, 3, audit.SeedOptions{}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("caller failed")
	err := database.InTenantTx(ctx, f.db.App, tn, func(tx pgx.Tx) error {
		if err := f.rec.Append(ctx, tx, ev("rolled back")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("rolled back append: %v", err)
	}

	// Readers see the seven through the view, and each waits in the queue.
	var before, queued []int64
	if err := f.db.Admin.QueryRow(ctx, `SELECT (SELECT array_agg(id ORDER BY id) FROM audit_events WHERE tenant_id = $1),
		(SELECT array_agg(event_id ORDER BY event_id) FROM audit_unsealed WHERE tenant_id = $1)`,
		tn).Scan(&before, &queued); err != nil {
		t.Fatal(err)
	}
	if len(before) != 7 || !slices.Equal(queued, before) {
		t.Fatalf("events %v, queued %v; want the same 7", before, queued)
	}
	f.seal(t)
	if r := f.verify(t, tn); !r.OK || r.TreeSize != 7 {
		t.Fatalf("after sealing: %+v, want a verified log of 7", r)
	}
	var after []int64
	var waiting int
	if err := f.db.Admin.QueryRow(ctx, `SELECT (SELECT array_agg(s.id ORDER BY s.id) FROM audit_sealed s
		    JOIN audit_leaves l ON l.tenant_id = s.tenant_id AND l.event_id = s.id WHERE s.tenant_id = $1),
		(SELECT count(*) FROM audit_unsealed WHERE tenant_id = $1)`, tn).Scan(&after, &waiting); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after, before) || waiting != 0 {
		t.Fatalf("sealed events with leaves %v, still queued %d; want %v and 0", after, waiting, before)
	}
}
