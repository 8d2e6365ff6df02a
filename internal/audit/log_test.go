package audit_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/jejakhq/jejak/internal/audit"
)

// openNote checks a checkpoint with golang.org/x/mod/sumdb/note alone and
// parses its C2SP body: origin, size, base64 root.
func openNote(t *testing.T, vkey, signed string) (origin string, size int64, root tlog.Hash) {
	t.Helper()
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open([]byte(signed), note.VerifierList(v))
	if err != nil {
		t.Fatalf("note.Open(checkpoint): %v\n%s", err, signed)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		t.Fatalf("checkpoint body %q: want origin, size, root and a final newline", n.Text)
	}
	size, err = strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if root, err = tlog.ParseHash(lines[2]); err != nil {
		t.Fatal(err)
	}
	return lines[0], size, root
}

// TestProofsCheckWithLibrariesJejakDidNotWrite: after sealing in rounds,
// every leaf's inclusion proof checks with golang.org/x/mod/sumdb/tlog and
// github.com/transparency-dev/merkle against the checkpoint that
// golang.org/x/mod/sumdb/note opens; each leaf hash is RFC 6962's hash of
// the served entry; and every pair of checkpoints is consistent.
func TestProofsCheckWithLibrariesJejakDidNotWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	other := f.tenant(t, "senja")
	f.recordN(t, other, 2)
	type cp struct {
		size int64
		root tlog.Hash
	}
	var cps []cp
	for _, n := range []int{1, 2, 4, 6, 17} {
		f.recordN(t, tn, n)
		f.seal(t)
		var signed string
		if err := f.db.System.QueryRow(ctx, `SELECT note FROM audit_checkpoints WHERE tenant_id = $1 ORDER BY size DESC LIMIT 1`, tn).Scan(&signed); err != nil {
			t.Fatal(err)
		}
		origin, size, root := openNote(t, f.vkey, signed)
		if origin != "jejak/audit/melati" {
			t.Fatalf("origin %q", origin)
		}
		cps = append(cps, cp{size, root})
	}
	last := cps[len(cps)-1]
	if last.size != 30 {
		t.Fatalf("last checkpoint size %d, want 30", last.size)
	}
	for seq := int64(1); seq <= last.size; seq++ {
		p, err := audit.ProveInclusion(ctx, f.db.System, tn, seq)
		if err != nil {
			t.Fatal(err)
		}
		_, size, root := openNote(t, f.vkey, p.Checkpoint)
		if size != last.size || root != last.root || p.TreeSize != size {
			t.Fatalf("proof of %d is against size %d, latest checkpoint is %d", seq, size, last.size)
		}
		entry, err := audit.LeafEntry(ctx, f.db.System, tn, seq)
		if err != nil {
			t.Fatal(err)
		}
		if tlog.RecordHash(entry) != p.LeafHash {
			t.Fatalf("leaf %d: the entry does not hash to the leaf hash", seq)
		}
		if sha256.Sum256(append([]byte{0}, entry...)) != [32]byte(p.LeafHash) {
			t.Fatalf("leaf %d: leaf hash is not SHA-256(0x00 ‖ entry)", seq)
		}
		if err := tlog.CheckRecord(p.Hashes, size, root, seq-1, p.LeafHash); err != nil {
			t.Fatalf("tlog.CheckRecord(leaf %d): %v", seq, err)
		}
		hashes := make([][]byte, len(p.Hashes))
		for i := range p.Hashes {
			hashes[i] = p.Hashes[i][:]
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(seq-1), uint64(size), p.LeafHash[:], hashes, root[:]); err != nil {
			t.Fatalf("merkle proof.VerifyInclusion(leaf %d): %v", seq, err)
		}
	}
	for i := range cps {
		for j := i; j < len(cps); j++ {
			a, b := cps[i], cps[j]
			hs, err := audit.ProveConsistency(ctx, f.db.System, tn, a.size, b.size)
			if err != nil {
				t.Fatal(err)
			}
			if err := tlog.CheckTree(hs, b.size, b.root, a.size, a.root); err != nil {
				t.Fatalf("tlog.CheckTree(%d → %d): %v", a.size, b.size, err)
			}
			raw := make([][]byte, len(hs))
			for k := range hs {
				raw[k] = hs[k][:]
			}
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, uint64(a.size), uint64(b.size), raw, a.root[:], b.root[:]); err != nil {
				t.Fatalf("merkle proof.VerifyConsistency(%d → %d): %v", a.size, b.size, err)
			}
		}
	}
	// Out of range is bad input, and another tenant's leaves are not here.
	for _, seq := range []int64{0, -1, last.size + 1} {
		if _, err := audit.ProveInclusion(ctx, f.db.System, tn, seq); !errors.Is(err, audit.ErrBeyondLog) {
			t.Errorf("proof of seq %d: %v, want ErrBeyondLog", seq, err)
		}
	}
	for _, c := range [][2]int64{{0, 5}, {6, 5}, {1, last.size + 1}} {
		if _, err := audit.ProveConsistency(ctx, f.db.System, tn, c[0], c[1]); !errors.Is(err, audit.ErrBeyondLog) {
			t.Errorf("consistency %v: %v, want ErrBeyondLog", c, err)
		}
	}
	if _, err := audit.LeafEntry(ctx, f.db.System, other, 3); !errors.Is(err, audit.ErrBeyondLog) {
		t.Errorf("tenant 2's leaf 3 (it has 2): %v", err)
	}
}

// TestExportVerifiesOfflineAgainstItsCheckpoint: an unfiltered JSON Lines
// export carries the checkpoint it was cut at and checks offline with the
// verifier key; an edited line, or another key, fails.
func TestExportVerifiesOfflineAgainstItsCheckpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	f.recordN(t, tn, 12)
	f.seal(t)
	f.recordN(t, tn, 2) // unsealed: not in the export
	var b strings.Builder
	if err := audit.ExportJSONLines(ctx, f.db.App, tn, audit.Filter{}, &b); err != nil {
		t.Fatal(err)
	}
	sum, err := audit.VerifyExport(strings.NewReader(b.String()), f.vkey)
	if err != nil || sum.Count != 12 || sum.TreeSize != 12 {
		t.Fatalf("verify export: %+v, %v", sum, err)
	}
	edited := strings.Replace(b.String(), `"entity_id":"7"`, `"entity_id":"8"`, 1)
	if _, err := audit.VerifyExport(strings.NewReader(edited), f.vkey); err == nil {
		t.Fatal("an edited export verified")
	}
	if _, err := audit.VerifyExport(strings.NewReader(b.String()), newSigner(t).VerifierKey()); err == nil {
		t.Fatal("the export verified with another operator's key")
	}
}
