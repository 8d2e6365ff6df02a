package anchor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/anchor"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

func record(t *testing.T, db *testdb.DB, tenant int64, n int, action string) {
	t.Helper()
	rec := audit.NewRecorder(nil)
	for i := 0; i < n; i++ {
		err := database.InTx(context.Background(), db.System, func(tx pgx.Tx) error {
			_, err := rec.Record(context.Background(), tx, audit.Event{TenantID: tenant, ActorKind: audit.ActorSystem,
				Action: action, Entity: "thing", EntityID: "1"})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// superuser runs sql with the audit triggers switched off, as an
// administrator covering their tracks would.
func superuser(t *testing.T, db *testdb.DB, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func check(t *testing.T, db *testdb.DB, s *anchor.Store) []anchor.Problem {
	t.Helper()
	latest, err := anchor.Latest(s.Dir(), s.Public())
	if err != nil {
		t.Fatal(err)
	}
	p, err := anchor.Check(context.Background(), db.System, latest)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAnchorsDetectRewoundChain: a superuser who truncates a tenant's tail
// and rewinds its head leaves a chain that verifies on its own; the signed
// checkpoint written before catches it, and also a tail rewritten to the
// same length.
func TestAnchorsDetectRewoundChain(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var tenant int64
	if err := db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ('acme', 'Acme') RETURNING id").Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	record(t, db, tenant, 5, "thing.made")
	s, err := anchor.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Write(ctx, db.System, false); err != nil || n != 1 {
		t.Fatalf("write anchors = %d, %v", n, err)
	}
	if n, err := s.Write(ctx, db.System, false); err != nil || n != 0 {
		t.Fatalf("unchanged heads anchored again: %d, %v", n, err)
	}
	if p := check(t, db, s); len(p) != 0 {
		t.Fatalf("problems on an intact chain: %+v", p)
	}

	// Rewind: drop events 4 and 5, move the head back onto event 3.
	superuser(t, db, `DELETE FROM audit_events WHERE tenant_id = $1 AND seq > 3`, tenant)
	superuser(t, db, `UPDATE audit_heads h SET seq = 3, hash = e.hash FROM audit_events e
		WHERE h.tenant_id = $1 AND e.tenant_id = $1 AND e.seq = 3`, tenant)
	if r, err := audit.Verify(ctx, db.System, tenant); err != nil || !r.OK {
		t.Fatalf("the rewound chain should verify on its own (that is the attack): %+v, %v", r, err)
	}
	p := check(t, db, s)
	if len(p) != 1 || !strings.Contains(p[0].Reason, "shorter") {
		t.Fatalf("rewound chain: problems %+v, want one 'shorter'", p)
	}
	// Rewrite: append two different events, back to the anchored length.
	record(t, db, tenant, 2, "thing.forged")
	p = check(t, db, s)
	if len(p) != 1 || !strings.Contains(p[0].Reason, "differs") {
		t.Fatalf("rewritten tail: problems %+v, want one 'differs'", p)
	}
	// A head removed altogether.
	superuser(t, db, `DELETE FROM audit_heads WHERE tenant_id = $1`, tenant)
	p = check(t, db, s)
	var noHead, eventsNoHead bool
	for _, x := range p {
		noHead = noHead || strings.Contains(x.Reason, "anchored at #5 but has no audit head")
		eventsNoHead = eventsNoHead || strings.Contains(x.Reason, "has audit events but no audit head")
	}
	if !noHead || !eventsNoHead {
		t.Fatalf("head deleted: problems %+v", p)
	}
	// A head whose tenant was deleted.
	superuser(t, db, `INSERT INTO audit_heads (tenant_id, seq, hash) VALUES (999999, 0, '\x0000000000000000000000000000000000000000000000000000000000000000')`)
	p = check(t, db, s)
	found := false
	for _, x := range p {
		found = found || (x.TenantID == 999999 && strings.Contains(x.Reason, "no tenant"))
	}
	if !found {
		t.Fatalf("head without tenant not reported: %+v", p)
	}
}

// TestAnchorsFileIsSigned: editing a checkpoint in the file (to match a
// rewound chain) breaks its signature.
func TestAnchorsFileIsSigned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := anchor.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cp := []anchor.Checkpoint{{TenantID: 1, Slug: "acme", Seq: 5, Hash: strings.Repeat("ab", 32)}}
	if err := s.Append(cp); err != nil {
		t.Fatal(err)
	}
	if _, err := anchor.Latest(dir, s.Public()); err != nil {
		t.Fatalf("intact file: %v", err)
	}
	path := filepath.Join(dir, anchor.AnchorsFile)
	raw, _ := os.ReadFile(path)
	if err := os.WriteFile(path, bytes.Replace(raw, []byte(`"seq":5`), []byte(`"seq":3`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := anchor.Latest(dir, s.Public()); err == nil {
		t.Fatal("an edited checkpoint was accepted")
	}
	// The key is generated once: reopening keeps it.
	s2, err := anchor.Open(dir)
	if err != nil || !bytes.Equal(s2.Public(), s.Public()) {
		t.Fatalf("reopened store has another key (%v)", err)
	}
}

// TestExportVerifiesOfflineAgainstCheckpoint follows docs/audit.md's
// recipe: an owner's JSON Lines export, checked without the database, ends
// at a head whose hash matches the signed checkpoint; an edited export
// fails.
func TestExportVerifiesOfflineAgainstCheckpoint(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var tenant int64
	if err := db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ('acme', 'Acme') RETURNING id").Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	record(t, db, tenant, 3, "thing.made")
	s, err := anchor.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, db.System, false); err != nil {
		t.Fatal(err)
	}
	record(t, db, tenant, 2, "thing.later")
	cp, ok, err := s.LatestFor(tenant)
	if err != nil || !ok {
		t.Fatalf("checkpoint: %v %v", ok, err)
	}
	var buf bytes.Buffer
	if err := database.InTenantTx(ctx, db.App, tenant, func(tx pgx.Tx) error {
		return audit.ExportJSONLines(ctx, tx, tenant, audit.Filter{}, &buf)
	}); err != nil {
		t.Fatal(err)
	}
	if err := anchor.VerifyExport(bytes.NewReader(buf.Bytes()), cp, s.Public()); err != nil {
		t.Fatalf("intact export: %v", err)
	}
	edited := bytes.Replace(buf.Bytes(), []byte(`"thing.made"`), []byte(`"thing.mady"`), 1)
	if err := anchor.VerifyExport(bytes.NewReader(edited), cp, s.Public()); err == nil {
		t.Fatal("an edited export verified")
	}
	// An export cut before the checkpoint does not reach it.
	lines := bytes.SplitAfter(buf.Bytes(), []byte("\n"))
	var second struct{ Hash string }
	if err := json.Unmarshal(lines[1], &second); err != nil {
		t.Fatal(err)
	}
	cut := bytes.Join(append(lines[:2:2], []byte(`{"trailer":{"count":2,"head_seq":2,"head_hash":"`+second.Hash+`"}}`+"\n")), nil)
	if err := anchor.VerifyExport(bytes.NewReader(cut), cp, s.Public()); err == nil {
		t.Fatal("an export shorter than its checkpoint verified")
	}
}
