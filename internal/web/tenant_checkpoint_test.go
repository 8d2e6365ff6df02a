package web_test

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/jejakhq/jejak/internal/anchor"
)

// TestOwnerDownloadsSignedCheckpoint: an owner gets the tenant's current
// head, signed; the signature verifies with the key in the file; a member
// is refused.
func TestOwnerDownloadsSignedCheckpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	owner := f.client()
	owner.login("budi@melati.test")
	a := owner.get("/t/toko-bunga-melati/audit/checkpoint")
	if a.status != http.StatusOK {
		t.Fatalf("owner: %d %s", a.status, a.body)
	}
	var cp struct {
		TenantID  int64  `json:"tenant_id"`
		Seq       int64  `json:"seq"`
		Hash      string `json:"hash"`
		Sig       string `json:"sig"`
		PublicKey string `json:"public_key"`
	}
	if err := json.Unmarshal([]byte(a.body), &cp); err != nil {
		t.Fatalf("checkpoint is not JSON: %v\n%s", err, a.body)
	}
	var seq int64
	var hash []byte
	if err := f.db.Admin.QueryRow(context.Background(), "SELECT seq, hash FROM audit_heads WHERE tenant_id = $1",
		f.tenantID("toko-bunga-melati")).Scan(&seq, &hash); err != nil {
		t.Fatal(err)
	}
	if cp.TenantID != f.tenantID("toko-bunga-melati") || cp.Seq < seq-1 || cp.Seq > seq {
		t.Fatalf("checkpoint tenant %d seq %d; head is #%d", cp.TenantID, cp.Seq, seq)
	}
	var signed anchor.Checkpoint
	if err := json.Unmarshal([]byte(a.body), &signed); err != nil {
		t.Fatal(err)
	}
	pub, _ := hex.DecodeString(cp.PublicKey)
	if len(pub) != ed25519.PublicKeySize || !signed.Valid(pub) || signed.Hash != cp.Hash {
		t.Fatalf("checkpoint signature does not verify with key %q", cp.PublicKey)
	}
	member := f.client()
	member.login("rina@melati.test")
	if a := member.get("/t/toko-bunga-melati/audit/checkpoint"); a.status != http.StatusForbidden {
		t.Fatalf("member: %d, want 403", a.status)
	}
}
