package audit_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/audit"
)

// TestVerifyDetectsTamperingOfEveryColumn: an administrator who switches
// off the append-only triggers and edits any one encoded column of a
// sealed event, or the seq or event of its leaf, is caught by Verify at
// that leaf; restoring the value makes the log verify again (so it is that
// column, not the edit itself, that is detected).
func TestVerifyDetectsTamperingOfEveryColumn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tenant := f.tenant(t, "acme")
	other := f.tenant(t, "other")
	u := f.user(t, "budi@example.com", tenant)
	u2 := f.user(t, "sari@example.com", tenant)
	job := int64(5)
	f.record(t, audit.Event{TenantID: tenant, ActorKind: audit.ActorUser, ActorID: &u, Action: "project.create",
		Entity: "project", EntityID: "1", Detail: json.RawMessage(`{"name":"Gudang"}`), TraceID: "t1", JobID: &job})
	f.record(t, audit.Event{TenantID: tenant, ActorKind: audit.ActorUser, ActorID: &u, Action: "project.create",
		Entity: "project", EntityID: "2", Detail: json.RawMessage(`{"name":"Toko"}`), TraceID: "t2", JobID: &job})
	f.seal(t)
	edits := map[string]string{
		"tenant_id":   "tenant_id = " + itoa(other),
		"actor_kind":  "actor_kind = 'staff'",
		"actor_id":    "actor_id = " + itoa(u2),
		"action":      "action = 'project.delete'",
		"entity":      "entity = 'projects'",
		"entity_id":   "entity_id = '9'",
		"detail":      `detail = '{"name":"Gudang!"}'`,
		"occurred_at": "occurred_at = occurred_at + interval '1 microsecond'",
		"trace_id":    "trace_id = 't9'",
		"job_id":      "job_id = 6",
	}
	var firstID int64
	if err := f.db.Admin.QueryRow(ctx, `SELECT event_id FROM audit_leaves WHERE tenant_id = $1 AND seq = 1`, tenant).Scan(&firstID); err != nil {
		t.Fatal(err)
	}
	first := itoa(firstID)
	// One connection: the saved copy is a temporary table.
	conn, err := f.db.Admin.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	admin := func(sql string) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for col, set := range edits {
		admin(`CREATE TEMP TABLE IF NOT EXISTS saved AS SELECT * FROM audit_sealed WITH NO DATA`)
		admin(`DELETE FROM saved; INSERT INTO saved SELECT * FROM audit_sealed WHERE tenant_id = ` + itoa(tenant) + ` AND id = ` + first)
		admin(`UPDATE audit_sealed SET ` + set + ` WHERE tenant_id = ` + itoa(tenant) + ` AND id = ` + first)
		if r := f.verify(t, tenant); r.OK || r.FirstBadSeq != 1 {
			t.Errorf("tampering with %s: %+v, want first bad seq 1", col, r)
		}
		admin(`DELETE FROM audit_sealed WHERE id = (SELECT id FROM saved);
		       INSERT INTO audit_sealed OVERRIDING SYSTEM VALUE SELECT * FROM saved`)
		if r := f.verify(t, tenant); !r.OK {
			t.Fatalf("after restoring %s: %+v", col, r)
		}
	}
	// The event's id is generated, so it moves by delete and insert, with
	// its leaf following it: the same event under another id.
	moved := itoa(firstID + 1000)
	admin(`DELETE FROM saved; INSERT INTO saved SELECT * FROM audit_sealed WHERE id = ` + first)
	admin(`DELETE FROM audit_sealed WHERE id = ` + first + `;
	       INSERT INTO audit_sealed OVERRIDING SYSTEM VALUE SELECT tenant_id, seq, ` + moved + `, actor_kind, actor_id, action, entity,
	         entity_id, detail, occurred_at, trace_id, job_id, prev_hash, hash FROM saved;
	       UPDATE audit_leaves SET event_id = ` + moved + ` WHERE event_id = ` + first)
	if r := f.verify(t, tenant); r.OK || r.FirstBadSeq != 1 || !strings.Contains(r.Reason, "altered") {
		t.Errorf("tampering with id: %+v, want first bad seq 1 altered", r)
	}
	admin(`DELETE FROM audit_sealed WHERE id = ` + moved + `;
	       INSERT INTO audit_sealed OVERRIDING SYSTEM VALUE SELECT * FROM saved;
	       UPDATE audit_leaves SET event_id = ` + first + ` WHERE event_id = ` + moved)
	if r := f.verify(t, tenant); !r.OK {
		t.Fatalf("after restoring id: %+v", r)
	}
	// The leaf's own columns: its seq and the event it seals.
	for col, set := range map[string][2]string{
		"leaf seq":      {"seq = 3", "seq = 1"},
		"leaf event_id": {"event_id = event_id + 1000", "event_id = event_id - 1000"},
	} {
		admin(`UPDATE audit_leaves SET ` + set[0] + ` WHERE tenant_id = ` + itoa(tenant) + ` AND seq = 1`)
		if r := f.verify(t, tenant); r.OK || r.FirstBadSeq != 1 {
			t.Errorf("tampering with the %s: %+v, want first bad seq 1", col, r)
		}
		where := "seq = 1"
		if col == "leaf seq" {
			where = "seq = 3"
		}
		admin(`UPDATE audit_leaves SET ` + set[1] + ` WHERE tenant_id = ` + itoa(tenant) + ` AND ` + where)
		if r := f.verify(t, tenant); !r.OK {
			t.Fatalf("after restoring the %s: %+v", col, r)
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
