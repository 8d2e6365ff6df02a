package web_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// signedTree opens a checkpoint note with golang.org/x/mod/sumdb/note
// under the verifier key the server publishes, and reads its C2SP body.
func signedTree(t *testing.T, vkey, signed string) (origin string, size uint64, root []byte) {
	t.Helper()
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		t.Fatalf("verifier key %q: %v", vkey, err)
	}
	n, err := note.Open([]byte(signed), note.VerifierList(v))
	if err != nil {
		t.Fatalf("note.Open: %v\n%s", err, signed)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		t.Fatalf("checkpoint body %q", n.Text)
	}
	if size, err = strconv.ParseUint(lines[1], 10, 64); err != nil {
		t.Fatal(err)
	}
	if root, err = base64.StdEncoding.DecodeString(lines[2]); err != nil {
		t.Fatal(err)
	}
	return lines[0], size, root
}

func unb64(t *testing.T, ss ...string) [][]byte {
	t.Helper()
	out := make([][]byte, len(ss))
	for i, s := range ss {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("base64 %q: %v", s, err)
		}
		out[i] = b
	}
	return out
}

type proofJSON struct {
	Seq        int64    `json:"seq"`
	LeafIndex  uint64   `json:"leaf_index"`
	TreeSize   uint64   `json:"tree_size"`
	LeafHash   string   `json:"leaf_hash"`
	Hashes     []string `json:"hashes"`
	Checkpoint string   `json:"checkpoint"`
	Entry      string   `json:"entry"`
}

// TestAuditLogRoutesProveWithOutsideLibraries: an owner's sealed events
// are proven over HTTP in terms that golang.org/x/mod's note package and
// transparency-dev/merkle check on their own, with the key from
// /audit/key; the timeline links each sealed event to its proof; bad
// parameters are a 400 and another tenant's owner gets a 404.
func TestAuditLogRoutesProveWithOutsideLibraries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login("budi@melati.test")
	base := "/t/" + melati + "/audit/log/"

	if a := c.get(base + "checkpoint"); a.status != http.StatusNotFound {
		t.Fatalf("checkpoint before any seal: %d %.200s", a.status, a.body)
	}
	key := c.get("/audit/key")
	if key.status != http.StatusOK || !strings.HasPrefix(key.body, "jejak-audit+") {
		t.Fatalf("/audit/key: %d %q", key.status, key.body)
	}

	f.record(melati, nil, systemEvents(3, "report.sent")...)
	f.seal()
	a := c.get(base + "checkpoint")
	if a.status != http.StatusOK {
		t.Fatalf("checkpoint: %d %.200s", a.status, a.body)
	}
	origin, size1, root1 := signedTree(t, key.body, a.body)
	if origin != "jejak/audit/"+melati || size1 < 3 {
		t.Fatalf("checkpoint origin %q size %d", origin, size1)
	}

	// Every leaf's inclusion, and its entry hashing to the proven leaf.
	for seq := int64(1); seq <= int64(size1); seq++ {
		a := c.get(base + "proof?seq=" + strconv.FormatInt(seq, 10))
		var p proofJSON
		if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &p) != nil {
			t.Fatalf("proof of %d: %d %.200s", seq, a.status, a.body)
		}
		if _, size, root := signedTree(t, key.body, p.Checkpoint); size != p.TreeSize || string(root) != string(root1) {
			t.Fatalf("proof of %d is against tree %d, want the checkpoint's %d", seq, size, size1)
		}
		leaf := unb64(t, p.LeafHash)[0]
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, p.LeafIndex, p.TreeSize, leaf, unb64(t, p.Hashes...), root1); err != nil {
			t.Fatalf("merkle VerifyInclusion(%d): %v", seq, err)
		}
		entry := c.get(base + "entry?seq=" + strconv.FormatInt(seq, 10))
		if entry.status != http.StatusOK || string(rfc6962.DefaultHasher.HashLeaf([]byte(entry.body))) != string(leaf) {
			t.Fatalf("entry %d: %d, or it does not hash to its proven leaf", seq, entry.status)
		}
	}

	// "Prove this event": a sealed event's record (what "Details" unfolds
	// on the timeline) links its bundle, a download holding the entry
	// beside its proof.
	var link []string
	for _, rec := range records(t, c, c.get("/t/"+melati+"/audit").body) {
		if link = regexp.MustCompile(`href="(/t/` + melati + `/audit/log/bundle\?seq=(\d+))"[^>]*data-testid="audit-proof"`).FindStringSubmatch(rec); link != nil {
			break
		}
	}
	if link == nil {
		t.Fatal("no proof link in the record of any sealed event on the timeline")
	}
	b := c.get(link[1])
	var bundle proofJSON
	if b.status != http.StatusOK || !strings.HasPrefix(b.header.Get("Content-Disposition"), "attachment") || json.Unmarshal([]byte(b.body), &bundle) != nil {
		t.Fatalf("bundle: %d %q %.200s", b.status, b.header.Get("Content-Disposition"), b.body)
	}
	entry := unb64(t, bundle.Entry)[0]
	_, bsize, broot := signedTree(t, key.body, bundle.Checkpoint)
	if strconv.FormatInt(bundle.Seq, 10) != link[2] || bsize != bundle.TreeSize ||
		proof.VerifyInclusion(rfc6962.DefaultHasher, bundle.LeafIndex, bundle.TreeSize, rfc6962.DefaultHasher.HashLeaf(entry), unb64(t, bundle.Hashes...), broot) != nil {
		t.Fatalf("the bundle does not prove its own entry: %+v", bundle)
	}

	// The tree grows; the old checkpoint is consistent with the new one.
	f.record(melati, nil, systemEvents(4, "report.sent")...)
	f.seal()
	_, size2, root2 := signedTree(t, key.body, c.get(base+"checkpoint").body)
	if size2 < size1+4 {
		t.Fatalf("tree grew from %d to %d, want +4", size1, size2)
	}
	cons := c.get(base + "consistency?from=" + strconv.FormatUint(size1, 10) + "&to=" + strconv.FormatUint(size2, 10))
	var cp struct {
		Hashes []string `json:"hashes"`
	}
	if cons.status != http.StatusOK || json.Unmarshal([]byte(cons.body), &cp) != nil {
		t.Fatalf("consistency: %d %.200s", cons.status, cons.body)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, size1, size2, unb64(t, cp.Hashes...), root1, root2); err != nil {
		t.Fatalf("merkle VerifyConsistency(%d → %d): %v", size1, size2, err)
	}
	// A proof bent by one hash fails the outside check.
	if len(cp.Hashes) > 0 {
		bent := unb64(t, cp.Hashes...)
		bent[0][0] ^= 1
		if proof.VerifyConsistency(rfc6962.DefaultHasher, size1, size2, bent, root1, root2) == nil {
			t.Fatal("a bent consistency proof verified: the check proves nothing")
		}
	}

	for _, path := range []string{
		"proof", "proof?seq=0", "proof?seq=abc", "proof?seq=" + strconv.FormatUint(size2+1, 10),
		"entry?seq=-1", "bundle?seq=" + strconv.FormatUint(size2+1, 10),
		"consistency?from=2", "consistency?from=5&to=3", "consistency?from=1&to=" + strconv.FormatUint(size2+1, 10),
	} {
		if a := c.get(base + path); a.status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400: %.200s", path, a.status, a.body)
		}
	}

	stranger := f.client()
	stranger.login("sari@senja.test")
	for _, path := range []string{"checkpoint", "proof?seq=1", "bundle?seq=1", "entry?seq=1", "consistency?from=1&to=2"} {
		if a := stranger.get(base + path); a.status != http.StatusNotFound || strings.Contains(a.body, "jejak/audit/"+melati) || strings.Contains(a.body, "report") {
			t.Errorf("another tenant's owner at %s: %d %.200s", path, a.status, a.body)
		}
	}
}
