package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
)

// TestSeedWalkthrough runs the audit trail's reference story (record,
// read back by entity, verify) on PostgreSQL.
func TestSeedWalkthrough(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	t1, t2 := f.tenant(t, "toko-bunga-melati"), f.tenant(t, "kopi-senja")
	u1, u2 := f.user(t, "budi@melati.test", t1), f.user(t, "sari@senja.test", t2)
	const projectID = "6"

	// 1) Three events, the third by the system with no user.
	f.clk.Set(time.Date(2026, 2, 2, 9, 5, 0, 0, jakarta))
	first := f.record(t, audit.Event{TenantID: t1, ActorKind: audit.ActorUser, ActorID: &u1,
		Action: "project.create", Entity: "project", EntityID: projectID,
		Detail: json.RawMessage(`{"nama":"Landing Page Lebaran"}`)})
	if first.Seq != 0 || first.ID == 0 || first.TenantID != t1 || first.Action != "project.create" ||
		!first.OccurredAt.Equal(time.Date(2026, 2, 2, 2, 5, 0, 0, time.UTC)) {
		t.Fatalf("first event = seq %d tenant %d %s at %v", first.Seq, first.TenantID, first.Action, first.OccurredAt)
	}
	f.clk.Set(time.Date(2026, 2, 2, 10, 15, 0, 0, jakarta))
	f.record(t, audit.Event{TenantID: t2, ActorKind: audit.ActorUser, ActorID: &u2,
		Action: "project.delete", Entity: "project", EntityID: "5",
		Detail: json.RawMessage(`{"nama":"Katalog Musim Hujan"}`)})
	f.clk.Set(time.Date(2026, 2, 2, 23, 0, 0, 0, jakarta))
	sys := f.record(t, audit.Event{TenantID: t2, ActorKind: audit.ActorSystem,
		Action: "system.export-harian", Entity: "tenant", EntityID: "2",
		Detail: json.RawMessage(`{"tabel":["projects","memberships"]}`)})
	f.seal(t)
	var sysSeq int64
	if err := f.db.Admin.QueryRow(ctx, `SELECT seq FROM audit_leaves WHERE tenant_id = $1 AND event_id = $2`, t2, sys.ID).Scan(&sysSeq); err != nil || sysSeq != 2 {
		t.Errorf("tenant 2's second event has seq %d (%v), want 2 (sequences are per tenant)", sysSeq, err)
	}
	var storedActor *int64
	var kind string
	if err := f.db.Admin.QueryRow(ctx, `SELECT actor_kind, actor_id FROM audit_events WHERE tenant_id = $1 AND id = $2`, t2, sys.ID).Scan(&kind, &storedActor); err != nil {
		t.Fatal(err)
	}
	if kind != "system" || storedActor != nil {
		t.Errorf("system event stored actor %s/%v, want system/NULL", kind, storedActor)
	}

	// 2) Replay the new project's history from tenant 1's context.
	var hist []audit.Recorded
	readAs := func(tenant int64) []audit.Recorded {
		t.Helper()
		err := database.InTenantTx(ctx, f.db.App, tenant, func(tx pgx.Tx) (err error) {
			h, err := audit.EntityHistory(ctx, tx, tenant, "project", projectID)
			hist = h.Events
			return err
		})
		if err != nil {
			t.Fatalf("history: %v", err)
		}
		return hist
	}
	hist = readAs(t1)
	if len(hist) != 1 || hist[0].Action != "project.create" || *hist[0].ActorID != u1 ||
		string(hist[0].Detail) != `{"nama": "Landing Page Lebaran"}` {
		t.Fatalf("history of project 6 in tenant 1 = %+v", hist)
	}

	// 3) Same entity number in another tenant is another story.
	f.clk.Set(time.Date(2026, 2, 3, 8, 0, 0, 0, jakarta))
	f.record(t, audit.Event{TenantID: t2, ActorKind: audit.ActorUser, ActorID: &u2,
		Action: "project.create", Entity: "project", EntityID: projectID,
		Detail: json.RawMessage(`{"nama":"Duplikat nomor di tenant lain"}`)})
	if n := len(readAs(t1)); n != 1 {
		t.Errorf("history(tenant 1, project 6) has %d rows, want 1", n)
	}
	if h := readAs(t2); len(h) != 1 || !strings.Contains(string(h[0].Detail), "Duplikat") {
		t.Errorf("history(tenant 2, project 6) = %+v, want the one duplicate-number event", h)
	}

	// 4) Append-only: UPDATE, DELETE and TRUNCATE refused, even for the
	// superuser (by the triggers) and for the app role (by privileges).
	// One event waits for the sealer, so the queue has a row to refuse to
	// rewrite or remove (a statement that touches no row fires no row
	// trigger).
	f.record(t, audit.Event{TenantID: t1, ActorKind: audit.ActorSystem, Action: "system.check", Entity: "tenant", EntityID: "1"})
	for _, stmt := range []string{
		`UPDATE audit_events SET action = 'project.rename' WHERE true`,
		`DELETE FROM audit_events WHERE true`,
		`UPDATE audit_sealed SET action = 'project.rename' WHERE true`,
		`DELETE FROM audit_sealed WHERE true`,
		`TRUNCATE audit_sealed`,
		`UPDATE audit_unsealed SET action = 'project.rename' WHERE true`,
		`DELETE FROM audit_unsealed WHERE true`,
		`TRUNCATE audit_unsealed`,
		`UPDATE audit_leaves SET seq = seq WHERE true`,
		`DELETE FROM audit_checkpoints WHERE true`,
		`TRUNCATE audit_leaves`,
	} {
		if _, err := f.db.Admin.Exec(ctx, stmt); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("superuser %q: err = %v, want the append-only refusal", stmt, err)
		}
		err := database.InTenantTx(ctx, f.db.App, t1, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, stmt)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("jejak_app %q: err = %v, want permission denied", stmt, err)
		}
	}

	// 5) Invalid detail JSON is refused before touching the database, and
	// the caller's transaction stays usable.
	before := f.countAdmin(t, t1)
	err := database.InTenantTx(ctx, f.db.App, t1, func(tx pgx.Tx) error {
		_, err := f.rec.Record(ctx, tx, audit.Event{TenantID: t1, ActorKind: audit.ActorUser, ActorID: &u1,
			Action: "project.view", Entity: "project", EntityID: "1",
			Detail: json.RawMessage(`{nama: tanpa kutip}`)})
		if !errors.Is(err, audit.ErrInvalid) {
			t.Errorf("invalid detail: err = %v, want ErrInvalid", err)
		}
		var one int
		return tx.QueryRow(ctx, "SELECT 1").Scan(&one)
	})
	if err != nil {
		t.Fatalf("transaction after refused detail: %v", err)
	}
	if after := f.countAdmin(t, t1); after != before {
		t.Errorf("refused event wrote rows: %d -> %d", before, after)
	}
	for _, tenant := range []int64{t1, t2} {
		res, err := audit.Verify(ctx, f.db.App, tenant)
		if err != nil || !res.OK {
			t.Errorf("verify tenant %d: %+v, %v", tenant, res, err)
		}
	}
}

// TestRecordRejectsBadEvents: each malformed event is ErrInvalid, nothing
// is written.
func TestRecordRejectsBadEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	u := f.user(t, "a@b.test", tn)
	good := audit.Event{TenantID: tn, ActorKind: audit.ActorUser, ActorID: &u, Action: "project.create", Entity: "project", EntityID: "1"}
	cases := []struct {
		name string
		edit func(*audit.Event)
	}{
		{"invalid json", func(e *audit.Event) { e.Detail = json.RawMessage(`{"a":`) }},
		{"json array", func(e *audit.Event) { e.Detail = json.RawMessage(`[1,2]`) }},
		{"json null", func(e *audit.Event) { e.Detail = json.RawMessage(`null`) }},
		{"nul escape", func(e *audit.Event) { e.Detail = json.RawMessage(`{"a":"x\u0000"}`) }},
		{"system with actor id", func(e *audit.Event) { e.ActorKind = audit.ActorSystem }},
		{"user without id", func(e *audit.Event) { e.ActorID = nil }},
		{"unknown actor kind", func(e *audit.Event) { e.ActorKind = "robot" }},
		{"empty action", func(e *audit.Event) { e.Action = "" }},
		{"upper-case action", func(e *audit.Event) { e.Action = "Project.Delete" }},
		{"empty entity", func(e *audit.Event) { e.Entity = "" }},
		{"no tenant", func(e *audit.Event) { e.TenantID = 0 }},
	}
	for _, c := range cases {
		e := good
		c.edit(&e)
		err := database.InTenantTx(ctx, f.db.App, tn, func(tx pgx.Tx) error {
			_, err := f.rec.Record(ctx, tx, e)
			return err
		})
		if !errors.Is(err, audit.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", c.name, err)
		}
	}
	if n := f.countAdmin(t, tn); n != 0 {
		t.Errorf("%d rows written by refused events", n)
	}
	// A literal backslash-u0000 in a string is fine.
	e := good
	e.Detail = json.RawMessage(`{"a":"\\u0000"}`)
	f.record(t, e)
}
