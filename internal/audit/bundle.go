package audit

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"

	"golang.org/x/mod/sumdb/tlog"
)

// ProofBundle is one leaf's inclusion proof in the tree of a signed
// checkpoint, as the proof route serves it; with Entry set it is "Prove
// this event", a file checkable offline.
type ProofBundle struct {
	Seq        int64    `json:"seq"`
	LeafIndex  int64    `json:"leaf_index"`
	TreeSize   int64    `json:"tree_size"`
	LeafHash   string   `json:"leaf_hash"`
	Hashes     []string `json:"hashes"`
	Checkpoint string   `json:"checkpoint"`
	Entry      string   `json:"entry,omitempty"` // base64, bundles only
}

// Bundle is the proof as served: hashes in base64, entry left out.
func (p InclusionProof) Bundle() ProofBundle {
	hashes := make([]string, len(p.Hashes))
	for i, h := range p.Hashes {
		hashes[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	return ProofBundle{Seq: p.Seq, LeafIndex: p.Seq - 1, TreeSize: p.TreeSize,
		LeafHash: base64.StdEncoding.EncodeToString(p.LeafHash[:]), Hashes: hashes, Checkpoint: p.Checkpoint}
}

// VerifyProofBundle checks a bundle offline with only the verifier key:
// the checkpoint's signature, that the entry hashes to the leaf hash
// (RFC 6962: SHA-256 of 0x00 ‖ entry), and that the audit path leads from
// that leaf to the checkpoint's root (golang.org/x/mod/sumdb/tlog). It
// returns the checkpoint.
func VerifyProofBundle(r io.Reader, vkey string) (Checkpoint, error) {
	var b ProofBundle
	dec := json.NewDecoder(io.LimitReader(r, 16<<20))
	if err := dec.Decode(&b); err != nil {
		return Checkpoint{}, fmt.Errorf("proof bundle: %w", err)
	}
	cp, err := OpenCheckpoint([]byte(b.Checkpoint), vkey, "")
	if err != nil {
		return Checkpoint{}, err
	}
	entry, err := base64.StdEncoding.DecodeString(b.Entry)
	if err != nil {
		return cp, fmt.Errorf("proof bundle: entry is not base64")
	}
	leaf := sha256.Sum256(append([]byte{0}, entry...))
	if base64.StdEncoding.EncodeToString(leaf[:]) != b.LeafHash {
		return cp, fmt.Errorf("the entry does not hash to the leaf hash")
	}
	proof := make(tlog.RecordProof, len(b.Hashes))
	for i, h := range b.Hashes {
		if proof[i], err = tlog.ParseHash(h); err != nil {
			return cp, fmt.Errorf("proof bundle: hash %d: %w", i, err)
		}
	}
	if b.TreeSize != cp.Size || b.LeafIndex != b.Seq-1 {
		return cp, fmt.Errorf("the proof is for tree size %d, the checkpoint signs %d", b.TreeSize, cp.Size)
	}
	if err := tlog.CheckRecord(proof, cp.Size, cp.Root, b.LeafIndex, tlog.Hash(leaf)); err != nil {
		return cp, fmt.Errorf("the event is not in the signed tree: %w", err)
	}
	return cp, nil
}
