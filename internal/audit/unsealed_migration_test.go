package audit_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestWaitingEventsCarryOverWhole: events waiting for the sealer when the
// queue comes to hold whole events (migration 162) keep their ids and
// every column, show through audit_events as before, are sealed in id
// order, and the next event's id comes after theirs.
func TestWaitingEventsCarryOverWhole(t *testing.T) {
	t.Parallel()
	db := testdb.NewAt(t, 161)
	ctx := context.Background()
	var tn, user int64
	if err := db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ('melati', 'Melati') RETURNING id").Scan(&tn); err != nil {
		t.Fatal(err)
	}
	if err := db.Admin.QueryRow(ctx, "INSERT INTO users (email, name, password_hash) VALUES ('sari@melati.test', 'Sari', 'x') RETURNING id").Scan(&user); err != nil {
		t.Fatal(err)
	}
	// As that schema's writers wrote them: the event and its queue row.
	if _, err := db.System.Exec(ctx, `WITH e AS (INSERT INTO audit_events (tenant_id, actor_kind, actor_id, action, entity, entity_id, detail, occurred_at, trace_id, job_id)
		VALUES ($1, 'user', $2, 'project.create', 'project', '7', '{"name": "Katalog"}', '2026-03-01 10:00:00+07', 'trace-a', NULL),
		       ($1, 'system', NULL, 'job.succeeded', 'job', '9', '{}', '2026-03-01 10:00:01+07', '', 9),
		       ($1, 'staff', $2, 'support.view', 'tenant', '1', '{"why": "ticket"}', '2026-03-01 10:00:02+07', '', NULL)
		RETURNING tenant_id, id)
		INSERT INTO audit_unsealed (tenant_id, event_id) SELECT tenant_id, id FROM e`, tn, user); err != nil {
		t.Fatal(err)
	}
	// Each event whole, as text: the view keeps the old table's columns in
	// their order, so the same event reads the same before and after.
	read := func() (ids []int64, rows []string) {
		t.Helper()
		if err := db.Admin.QueryRow(ctx, `SELECT array_agg(e.id ORDER BY e.id), array_agg(e::text ORDER BY e.id)
			FROM audit_events e WHERE e.tenant_id = $1`, tn).Scan(&ids, &rows); err != nil {
			t.Fatal(err)
		}
		return ids, rows
	}
	before, beforeRows := read()

	if err := database.Migrate(ctx, db.URL); err != nil {
		t.Fatal(err)
	}
	after, afterRows := read()
	if len(before) != 3 || !slices.Equal(after, before) || !slices.Equal(afterRows, beforeRows) {
		t.Fatalf("events before the migration %q, after %q; want the same 3", beforeRows, afterRows)
	}
	var queued, sealed int
	if err := db.Admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_unsealed WHERE tenant_id = $1 AND action IS NOT NULL),
		(SELECT count(*) FROM audit_sealed WHERE tenant_id = $1)`, tn).Scan(&queued, &sealed); err != nil {
		t.Fatal(err)
	}
	if queued != 3 || sealed != 0 {
		t.Fatalf("queued %d, sealed %d; want the 3 events whole in the queue", queued, sealed)
	}

	signer, err := audit.GenerateLogSigner()
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.NewSealer(db.System, audit.SealerOptions{Signer: signer}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	var leaves []int64
	if err := db.Admin.QueryRow(ctx, `SELECT array_agg(s.id ORDER BY l.seq) FROM audit_leaves l
		JOIN audit_sealed s ON s.tenant_id = l.tenant_id AND s.id = l.event_id WHERE l.tenant_id = $1`, tn).Scan(&leaves); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(leaves, before) {
		t.Fatalf("leaves hold events %v, want %v in that order", leaves, before)
	}
	r, err := audit.VerifyWith(ctx, db.System, tn, audit.VerifyOptions{VerifierKey: signer.VerifierKey()})
	if err != nil || !r.OK || r.TreeSize != 3 {
		t.Fatalf("verify after sealing the carried events: %+v, %v", r, err)
	}
	var next int64
	if err := db.System.QueryRow(ctx, `INSERT INTO audit_unsealed (tenant_id, actor_kind, action, entity, entity_id, occurred_at)
		VALUES ($1, 'system', 'x.y', 'e', '1', now()) RETURNING event_id`, tn).Scan(&next); err != nil {
		t.Fatal(err)
	}
	if next <= before[2] {
		t.Fatalf("next event id %d, want one after %d", next, before[2])
	}
}
