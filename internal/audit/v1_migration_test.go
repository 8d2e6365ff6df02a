package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

// lastV1Schema is the last migration before the log (00098_audit_log).
const lastV1Schema = 97

// TestV1ChainsMigrateIntoTheLog loads hash chains the way the v1 recorder
// wrote them (seq, prev_hash and hash per event, heads moved by the
// trigger, events of two tenants interleaved), migrates, and seals: every
// v1 event becomes the leaf of its own seq, before the events recorded
// after the migration; the migrated tree is signed at once and verifies,
// also against the v1 heads as anchors; an edited v1 event is named at
// its seq.
func TestV1ChainsMigrateIntoTheLog(t *testing.T) {
	t.Parallel()
	db := testdb.NewAt(t, lastV1Schema)
	ctx := context.Background()
	var acme, globex int64
	for slug, id := range map[string]*int64{"acme": &acme, "globex": &globex} {
		if err := db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id", slug).Scan(id); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Admin.Exec(ctx, "INSERT INTO audit_heads (tenant_id, seq, hash) VALUES ($1, 0, $2)", *id, genesisHash); err != nil {
			t.Fatal(err)
		}
	}
	type chain struct {
		seq  int64
		prev []byte
	}
	chains := map[int64]*chain{acme: {prev: genesisHash}, globex: {prev: genesisHash}}
	at := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	v1 := func(tenant int64, action string) {
		t.Helper()
		c := chains[tenant]
		c.seq++
		detail := fmt.Sprintf(`{"n": %d, "note": "v1 event"}`, c.seq)
		var detailText string
		if err := db.Admin.QueryRow(ctx, "SELECT $1::jsonb::text", detail).Scan(&detailText); err != nil {
			t.Fatal(err)
		}
		at = at.Add(time.Minute + 123*time.Microsecond)
		f := chainFields{TenantID: tenant, Seq: c.seq, ActorKind: "system", Action: action, Entity: "thing",
			EntityID: fmt.Sprint(c.seq), DetailText: detailText, OccurredAt: at, TraceID: "trace-v1", PrevHash: c.prev, V1: true}
		h := eventHash(&f)
		_, err := db.Admin.Exec(ctx, `INSERT INTO audit_events (tenant_id, seq, actor_kind, action, entity, entity_id,
			detail, occurred_at, trace_id, prev_hash, hash) VALUES ($1, $2, 'system', $3, 'thing', $4, $5::jsonb, $6, 'trace-v1', $7, $8)`,
			tenant, c.seq, action, f.EntityID, detail, at, c.prev, h)
		if err != nil {
			t.Fatalf("insert v1 event %d of tenant %d: %v", c.seq, tenant, err)
		}
		c.prev = h
	}
	for i := 0; i < 7; i++ {
		v1(acme, "thing.made")
		if i%2 == 0 {
			v1(globex, "thing.made")
		}
	}
	heads := map[int64][]AnchorPoint{}
	for tenant, c := range chains {
		var seq int64
		var hash []byte
		if err := db.Admin.QueryRow(ctx, "SELECT seq, hash FROM audit_heads WHERE tenant_id = $1", tenant).Scan(&seq, &hash); err != nil {
			t.Fatal(err)
		}
		if seq != c.seq {
			t.Fatalf("v1 head of tenant %d at %d, want %d", tenant, seq, c.seq)
		}
		heads[tenant] = []AnchorPoint{{V1Seq: seq, V1Hash: hash}}
	}

	if err := database.Migrate(ctx, db.URL); err != nil {
		t.Fatalf("migrate v1 chains: %v", err)
	}
	// After the migration, new events are recorded the new way.
	rec := NewRecorder(nil)
	if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error {
		for _, tenant := range []int64{acme, globex} {
			if _, err := rec.Record(ctx, tx, Event{TenantID: tenant, ActorKind: ActorSystem, Action: "thing.after", Entity: "thing", EntityID: "new"}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := NewLogSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	// The server's sealer, as it runs: the first pass integrates the v1
	// chains and signs, due since the tree was never signed.
	sealer := NewSealer(db.System, SealerOptions{Signer: signer})
	for {
		res, err := sealer.SealOnce(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if res.Sealed == 0 {
			break
		}
	}
	for tenant, c := range chains {
		var v1Leaves, inOrder int64
		var after int64
		err := db.Admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE e.seq IS NOT NULL),
			count(*) FILTER (WHERE e.seq = l.seq),
			coalesce(max(l.seq) FILTER (WHERE e.action = 'thing.after'), 0)
			FROM audit_leaves l JOIN audit_events e ON e.tenant_id = l.tenant_id AND e.id = l.event_id
			WHERE l.tenant_id = $1`, tenant).Scan(&v1Leaves, &inOrder, &after)
		if err != nil {
			t.Fatal(err)
		}
		if v1Leaves != c.seq || inOrder != c.seq || after != c.seq+1 {
			t.Fatalf("tenant %d: %d v1 leaves, %d at their own seq, the new event at %d; want %d, %d, %d",
				tenant, v1Leaves, inOrder, after, c.seq, c.seq, c.seq+1)
		}
		var first int64
		if err := db.Admin.QueryRow(ctx, "SELECT min(size) FROM audit_checkpoints WHERE tenant_id = $1", tenant).Scan(&first); err != nil || first != c.seq {
			t.Fatalf("tenant %d: first checkpoint at size %d (%v); want the migrated tree (%d) signed at once", tenant, first, err, c.seq)
		}
		r, err := VerifyWith(ctx, db.System, tenant, VerifyOptions{VerifierKey: signer.VerifierKey(), Anchors: heads[tenant]})
		if err != nil || !r.OK || r.CheckedThrough != c.seq+1 {
			t.Fatalf("tenant %d after migration: %+v, %v", tenant, r, err)
		}
	}
	if err := sealer.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	page, err := Timeline(ctx, db.System, acme, Filter{Action: "thing.made"}, 0, 3)
	if err != nil || len(page.Rows) != 3 || page.Rows[0].Seq != chains[acme].seq {
		t.Fatalf("timeline of migrated events: %+v, %v", page.Rows, err)
	}

	// An edited v1 event (seq 3) fails both its chain hash and its leaf
	// (the edit needs the superuser to drop the check that keeps new and
	// changed rows off the v1 columns, too).
	for _, q := range []string{"ALTER TABLE audit_sealed DISABLE TRIGGER USER",
		"ALTER TABLE audit_sealed DROP CONSTRAINT audit_events_v2_unchained",
		fmt.Sprintf("UPDATE audit_sealed SET entity_id = 'edited' WHERE tenant_id = %d AND seq = 3", acme),
		"ALTER TABLE audit_sealed ENABLE TRIGGER USER"} {
		if _, err := db.Admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	r, err := VerifyWith(ctx, db.System, acme, VerifyOptions{VerifierKey: signer.VerifierKey(), Anchors: heads[acme]})
	if err != nil || r.OK || r.FirstBadSeq != 3 {
		t.Fatalf("edited v1 event: %+v, %v; want the first bad seq 3", r, err)
	}
}
