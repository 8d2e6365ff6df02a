package anchor_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/anchor"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
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

// sealer is the server's sealer over an anchor store: it signs with the
// store's key and appends every checkpoint to the store's file.
func sealer(t *testing.T, db *testdb.DB, s *anchor.Store) *audit.Sealer {
	t.Helper()
	signer, err := s.Signer()
	if err != nil {
		t.Fatal(err)
	}
	return audit.NewSealer(db.System, audit.SealerOptions{Signer: signer, Sink: s})
}

func drain(t *testing.T, sl *audit.Sealer) {
	t.Helper()
	if err := sl.Drain(context.Background()); err != nil {
		t.Fatalf("drain: %v", err)
	}
}

func points(t *testing.T, s *anchor.Store) map[int64][]audit.AnchorPoint {
	t.Helper()
	p, err := anchor.Points(s.Dir(), s.Public())
	if err != nil {
		t.Fatalf("points: %v", err)
	}
	return p
}

func vkeyOf(t *testing.T, pub ed25519.PublicKey) string {
	t.Helper()
	vkey, err := audit.VerifierKeyOf(pub)
	if err != nil {
		t.Fatal(err)
	}
	return vkey
}

func verify(t *testing.T, db *testdb.DB, tenant int64, vkey string, anchors []audit.AnchorPoint) audit.VerifyResult {
	t.Helper()
	r, err := audit.VerifyWith(context.Background(), db.System, tenant, audit.VerifyOptions{VerifierKey: vkey, Anchors: anchors})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return r
}

func newTenant(t *testing.T, db *testdb.DB, slug string) int64 {
	t.Helper()
	var id int64
	if err := db.Admin.QueryRow(context.Background(), "INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id", slug).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestSealerAppendsCheckpointsToAnchors: every checkpoint the sealer signs
// lands in the anchor file, one point per signed tree size, and a drain
// with nothing new appends nothing.
func TestSealerAppendsCheckpointsToAnchors(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenant(t, db, "acme")
	s, err := anchor.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sl := sealer(t, db, s)
	if p := points(t, s); len(p) != 0 {
		t.Fatalf("points before any seal: %+v", p)
	}
	record(t, db, tenant, 3, "thing.made")
	drain(t, sl)
	record(t, db, tenant, 2, "thing.made")
	drain(t, sl)
	drain(t, sl) // nothing new: no checkpoint
	p := points(t, s)[tenant]
	if len(p) != 2 || p[0].Size != 3 || p[1].Size != 5 || len(p[1].Root) != 32 {
		t.Fatalf("anchored points %+v, want sizes 3 and 5", p)
	}
	if r := verify(t, db, tenant, vkeyOf(t, s.Public()), p); !r.OK || r.TreeSize != 5 || !bytes.Equal(r.Root, p[1].Root) {
		t.Fatalf("intact log against its anchors: %+v", r)
	}
}

// TestAnchorsDetectRewoundLog: a superuser who truncates a tenant's tail
// and rewinds its tree (and drops the later checkpoints) leaves a log
// that verifies on its own; the checkpoints anchored outside the database
// catch it, and also a tail rewritten to the same length.
func TestAnchorsDetectRewoundLog(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenant(t, db, "acme")
	s, err := anchor.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	vkey := vkeyOf(t, s.Public())
	sl := sealer(t, db, s)
	record(t, db, tenant, 3, "thing.made")
	drain(t, sl)
	record(t, db, tenant, 2, "thing.made")
	drain(t, sl)
	if r := verify(t, db, tenant, vkey, points(t, s)[tenant]); !r.OK {
		t.Fatalf("intact log: %+v", r)
	}

	// Rewind: drop leaves and events 4 and 5 and the checkpoint of size 5,
	// and move the tree back onto its signed state of size 3.
	superuser(t, db, `DELETE FROM audit_sealed e USING audit_leaves l
		WHERE l.tenant_id = $1 AND e.tenant_id = $1 AND e.id = l.event_id AND l.seq > 3`, tenant)
	superuser(t, db, `DELETE FROM audit_leaves WHERE tenant_id = $1 AND seq > 3`, tenant)
	superuser(t, db, `DELETE FROM audit_checkpoints WHERE tenant_id = $1 AND size > 3`, tenant)
	superuser(t, db, `UPDATE audit_trees t SET size = 3, signed_size = 3, root = c.root
		FROM audit_checkpoints c WHERE t.tenant_id = $1 AND c.tenant_id = $1 AND c.size = 3`, tenant)
	if r := verify(t, db, tenant, vkey, nil); !r.OK || r.TreeSize != 3 {
		t.Fatalf("the rewound log should verify on its own (that is the attack): %+v", r)
	}
	r := verify(t, db, tenant, vkey, points(t, s)[tenant])
	if r.OK || r.FirstBadSeq != 4 || !strings.Contains(r.Reason, "rewound") {
		t.Fatalf("rewound log against its anchors: %+v, want 'rewound' at #4", r)
	}

	// Rewrite: two different events sealed (and signed, by the running
	// sealer) back to the anchored length.
	record(t, db, tenant, 2, "thing.forged")
	drain(t, sl)
	anchored := points(t, s)[tenant]
	if n := len(anchored); n != 3 || anchored[n-1].Size != 5 || bytes.Equal(anchored[1].Root, anchored[2].Root) {
		t.Fatalf("anchors after the rewrite: %+v, want two different roots of size 5", anchored)
	}
	if r := verify(t, db, tenant, vkey, nil); !r.OK {
		t.Fatalf("the rewritten log verifies on its own: %+v", r)
	}
	r = verify(t, db, tenant, vkey, anchored)
	if r.OK || r.FirstBadSeq != 4 || !strings.Contains(r.Reason, "rewritten") {
		t.Fatalf("rewritten tail against its anchors: %+v, want 'rewritten' after #3", r)
	}

	// The whole log removed: the tenant's tree is gone, the anchors are not.
	superuser(t, db, `DELETE FROM audit_leaves WHERE tenant_id = $1`, tenant)
	superuser(t, db, `DELETE FROM audit_checkpoints WHERE tenant_id = $1`, tenant)
	superuser(t, db, `DELETE FROM audit_trees WHERE tenant_id = $1`, tenant)
	superuser(t, db, `DELETE FROM audit_sealed WHERE tenant_id = $1`, tenant)
	if r := verify(t, db, tenant, vkey, nil); !r.OK || r.TreeSize != 0 {
		t.Fatalf("an emptied log verifies on its own: %+v", r)
	}
	results, err := audit.VerifyAll(ctx, db.System, vkey, points(t, s))
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].TenantID != tenant || results[0].OK || !strings.Contains(results[0].Reason, "rewound") {
		t.Fatalf("VerifyAll of an emptied log with anchors: %+v", results)
	}
}

// TestAnchorsFileIsSigned: editing a checkpoint in the file (to match a
// rewound log), or a checkpoint signed with another key, is refused; an
// anchor that goes back to a smaller tree is refused; the key is made
// once.
func TestAnchorsFileIsSigned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := anchor.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := s.Signer()
	if err != nil {
		t.Fatal(err)
	}
	if signer.VerifierKey() != vkeyOf(t, s.Public()) {
		t.Fatalf("signer key %q is not the store's public key", signer.VerifierKey())
	}
	root := bytes.Repeat([]byte{0xab}, 32)
	cp := func(signer *audit.LogSigner, size int64) audit.SignedCheckpoint {
		note, err := signer.Sign(audit.Origin("acme"), size, root)
		if err != nil {
			t.Fatal(err)
		}
		return audit.SignedCheckpoint{TenantID: 1, Slug: "acme", Size: size, Root: root, Note: note}
	}
	if err := s.AppendCheckpoints([]audit.SignedCheckpoint{cp(signer, 5)}); err != nil {
		t.Fatal(err)
	}
	p, err := anchor.Points(dir, s.Public())
	if err != nil || len(p[1]) != 1 || p[1][0].Size != 5 || !bytes.Equal(p[1][0].Root, root) {
		t.Fatalf("intact file: %+v, %v", p, err)
	}
	path := filepath.Join(dir, anchor.AnchorsFile)
	intact, _ := os.ReadFile(path)
	edited := bytes.Replace(intact, []byte(`\n5\n`), []byte(`\n3\n`), 1)
	if bytes.Equal(edited, intact) {
		t.Fatalf("the test's edit did not apply to %s", intact)
	}
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := anchor.Points(dir, s.Public()); err == nil {
		t.Fatal("an edited checkpoint was accepted")
	}

	// Signed with another key.
	other, err := anchor.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	otherSigner, err := other.Signer()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, intact, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendCheckpoints([]audit.SignedCheckpoint{cp(otherSigner, 6)}); err != nil {
		t.Fatal(err)
	}
	if _, err := anchor.Points(dir, s.Public()); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a checkpoint signed with another key: %v", err)
	}

	// Going back to a smaller tree.
	if err := os.WriteFile(path, intact, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendCheckpoints([]audit.SignedCheckpoint{cp(signer, 4)}); err != nil {
		t.Fatal(err)
	}
	if _, err := anchor.Points(dir, s.Public()); err == nil || !strings.Contains(err.Error(), "goes back") {
		t.Fatalf("a tree going back from 5 to 4: %v", err)
	}

	// The key is generated once: reopening keeps it.
	s2, err := anchor.Open(dir)
	if err != nil || !bytes.Equal(s2.Public(), s.Public()) {
		t.Fatalf("reopened store has another key (%v)", err)
	}
	if pub, err := anchor.LoadPublic(dir); err != nil || !bytes.Equal(pub, s.Public()) {
		t.Fatalf("LoadPublic = %x, %v; want %x", pub, err, s.Public())
	}
}

// TestAnchorsReadLegacyV1Lines: lines written before the log (a chain
// head's seq and hash, signed over the v1 message with the same key) stay
// readable as v1 points, and an edited one is refused.
func TestAnchorsReadLegacyV1Lines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := anchor.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, anchor.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	seed, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	hash := strings.Repeat("cd", 32)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	msg := "jejak-anchor-v1\n7\n12\n" + hash + "\n" + at.Format(time.RFC3339Nano)
	v1 := func(sig []byte, seq int64) []byte {
		b, err := json.Marshal(map[string]any{"tenant_id": 7, "slug": "acme", "seq": seq, "hash": hash, "at": at,
			"sig": base64.StdEncoding.EncodeToString(sig)})
		if err != nil {
			t.Fatal(err)
		}
		return append(b, '\n')
	}
	path := filepath.Join(dir, anchor.AnchorsFile)
	if err := os.WriteFile(path, v1(ed25519.Sign(priv, []byte(msg)), 12), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := anchor.Points(dir, s.Public())
	want, _ := hex.DecodeString(hash)
	if err != nil || len(p[7]) != 1 || p[7][0].V1Seq != 12 || !bytes.Equal(p[7][0].V1Hash, want) || p[7][0].Size != 0 {
		t.Fatalf("v1 line: %+v, %v", p, err)
	}
	// A v2 checkpoint after it, of at least the v1 length, is fine.
	signer, err := s.Signer()
	if err != nil {
		t.Fatal(err)
	}
	root := bytes.Repeat([]byte{1}, 32)
	note, err := signer.Sign(audit.Origin("acme"), 12, root)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AppendCheckpoints([]audit.SignedCheckpoint{{TenantID: 7, Slug: "acme", Size: 12, Root: root, Note: note}}); err != nil {
		t.Fatal(err)
	}
	if p, err := anchor.Points(dir, s.Public()); err != nil || len(p[7]) != 2 || p[7][1].Size != 12 {
		t.Fatalf("v1 then v2: %+v, %v", p, err)
	}
	// The seq moved: the signature no longer covers it.
	if err := os.WriteFile(path, v1(ed25519.Sign(priv, []byte(msg)), 11), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := anchor.Points(dir, s.Public()); err == nil || !strings.Contains(err.Error(), "bad signature") {
		t.Fatalf("an edited v1 line: %v", err)
	}
	// Signed by another key.
	_, otherKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, v1(ed25519.Sign(otherKey, []byte(msg)), 12), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := anchor.Points(dir, s.Public()); err == nil {
		t.Fatal("a v1 line signed with another key was accepted")
	}
}

// TestExportVerifiesOfflineAgainstCheckpoint follows docs/audit.md's
// recipe: an owner's JSON Lines export holds the sealed events up to the
// latest checkpoint, which its trailer carries; checked without the
// database and with only the anchor key's verifier key, it verifies; an
// edited or cut export, or another operator's key, fails.
func TestExportVerifiesOfflineAgainstCheckpoint(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenant(t, db, "acme")
	s, err := anchor.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	vkey := vkeyOf(t, s.Public())
	record(t, db, tenant, 3, "thing.made")
	drain(t, sealer(t, db, s))
	record(t, db, tenant, 2, "thing.later") // not sealed: not in the export
	var buf bytes.Buffer
	if err := audit.ExportJSONLines(ctx, db.App, tenant, audit.Filter{}, &buf); err != nil {
		t.Fatal(err)
	}
	sum, err := audit.VerifyExport(bytes.NewReader(buf.Bytes()), vkey)
	if err != nil {
		t.Fatalf("intact export: %v\n%s", err, buf.Bytes())
	}
	if sum.TenantID != tenant || sum.Count != 3 || sum.TreeSize != 3 {
		t.Fatalf("export summary %+v, want 3 events of tenant %d", sum, tenant)
	}
	if p := points(t, s)[tenant]; len(p) != 1 || !bytes.Equal(p[0].Root, sum.Root[:]) {
		t.Fatalf("export root %x is not the anchored one %+v", sum.Root, p)
	}
	edited := bytes.Replace(buf.Bytes(), []byte(`"thing.made"`), []byte(`"thing.mady"`), 1)
	if _, err := audit.VerifyExport(bytes.NewReader(edited), vkey); err == nil {
		t.Fatal("an edited export verified")
	}
	// An export cut before the checkpoint does not reach it, whatever its
	// trailer counts.
	lines := bytes.SplitAfter(buf.Bytes(), []byte("\n"))
	trailer := bytes.Replace(lines[3], []byte(`"count":3`), []byte(`"count":2`), 1)
	cut := bytes.Join([][]byte{lines[0], lines[1], trailer}, nil)
	if _, err := audit.VerifyExport(bytes.NewReader(cut), vkey); err == nil || !strings.Contains(err.Error(), "signs 3 events") {
		t.Fatalf("an export shorter than its checkpoint: %v", err)
	}
	other, err := anchor.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.VerifyExport(bytes.NewReader(buf.Bytes()), vkeyOf(t, other.Public())); err == nil {
		t.Fatal("an export verified with another operator's key")
	}
}

// TestOpenWithKeyKeepsTheGivenKey: a directory opened with a seed holds
// that key for every later Open (the verifier key derives from it), and a
// directory that already holds another key refuses it.
func TestOpenWithKeyKeepsTheGivenKey(t *testing.T) {
	t.Parallel()
	seed := bytes.Repeat([]byte{3}, ed25519.SeedSize)
	dir := t.TempDir()
	if _, err := anchor.OpenWithKey(dir, seed); err != nil {
		t.Fatal(err)
	}
	if _, err := anchor.OpenWithKey(dir, seed); err != nil {
		t.Fatalf("opened again with its own key: %v", err)
	}
	s, err := anchor.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey); !s.Public().Equal(want) {
		t.Errorf("Open after OpenWithKey: public key %x, want %x", s.Public(), want)
	}
	other := t.TempDir()
	if _, err := anchor.Open(other); err != nil {
		t.Fatal(err)
	}
	if _, err := anchor.OpenWithKey(other, seed); err == nil || !strings.Contains(err.Error(), "another key") {
		t.Errorf("OpenWithKey on a directory with its own key: %v, want an error", err)
	}
}

// TestOpenAtOnce: replicas started together on one empty anchor directory
// all start, each signing with the one key the directory holds.
func TestOpenAtOnce(t *testing.T) {
	t.Parallel()
	const replicas = 8
	for round := range 50 {
		dir := t.TempDir()
		stores := make([]*anchor.Store, replicas)
		errs := make([]error, replicas)
		testwait.Together(replicas, func(i int) { stores[i], errs[i] = anchor.Open(dir) })
		for i := range replicas {
			if errs[i] != nil {
				t.Fatalf("round %d: replica %d: %v", round, i, errs[i])
			}
			if !stores[i].Public().Equal(stores[0].Public()) {
				t.Fatalf("round %d: replica %d signs with another key than replica 0", round, i)
			}
		}
	}
}
