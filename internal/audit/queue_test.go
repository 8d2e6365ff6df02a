package audit_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
)

// TestEveryWriterQueuesItsEvents: the statement that inserts events also
// queues them for the sealer, on every path a writer takes (Record,
// Append, AppendMany, the large-data seed), and a rolled back transaction
// leaves neither. An event without its queue row would never be sealed.
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

	var events, queued, strays int
	if err := f.db.Admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_events WHERE tenant_id = $1),
		(SELECT count(*) FROM audit_events e WHERE e.tenant_id = $1
		    AND EXISTS (SELECT 1 FROM audit_unsealed u WHERE u.tenant_id = e.tenant_id AND u.event_id = e.id)),
		(SELECT count(*) FROM audit_unsealed u WHERE u.tenant_id = $1
		    AND NOT EXISTS (SELECT 1 FROM audit_events e WHERE e.tenant_id = u.tenant_id AND e.id = u.event_id))`,
		tn).Scan(&events, &queued, &strays); err != nil {
		t.Fatal(err)
	}
	if events != 7 || queued != 7 || strays != 0 {
		t.Fatalf("events %d, queued %d, queue rows without an event %d; want 7, 7, 0", events, queued, strays)
	}
	f.seal(t)
	if r := f.verify(t, tn); !r.OK || r.TreeSize != 7 {
		t.Fatalf("after sealing: %+v, want a verified log of 7", r)
	}
}

// TestEveryEventInsertQueues: no query may insert audit events without
// queueing them in the same statement (the database has no trigger that
// would do it for a query that forgets).
func TestEveryEventInsertQueues(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../db/query/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("query files: %v (%d)", err, len(files))
	}
	inserts := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range strings.Split(string(b), "-- name: ")[1:] {
			name, _, _ := strings.Cut(q, " ")
			if !strings.Contains(q, "INSERT INTO audit_events") {
				continue
			}
			inserts++
			if !strings.Contains(q, "INSERT INTO audit_unsealed") {
				t.Errorf("%s (%s) inserts audit events without queueing them in audit_unsealed", name, filepath.Base(file))
			}
		}
	}
	if inserts < 4 {
		t.Fatalf("found %d queries inserting audit events; the writers have at least 4", inserts)
	}
}
