package audit

import (
	"context"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// A tenant's Merkle tree is stored the way golang.org/x/mod/sumdb/tlog
// numbers it: appending record n (leaf index n, seq n+1) stores the hashes
// tlog.StoredHashes returns, the leaf hash and one hash per subtree the
// leaf completes, in that leaf's audit_leaves row. RFC 6962 hashing: leaf
// = SHA-256(0x00 ‖ entry), node = SHA-256(0x01 ‖ left ‖ right).

// hashLocation says which leaf row holds stored hash index i, and at which
// position: a hash of level L over the subtree ending at record n was
// stored when record n was appended, as its L-th hash.
func hashLocation(i int64) (seq int64, pos int) {
	level, k := tlog.SplitStoredHashIndex(i)
	last := (k+1)<<level - 1
	return last + 1, level
}

// treeHashes reads a tenant's stored hashes from audit_leaves, remembering
// what it read and what the sealer wrote in this batch, so one batch or one
// proof costs a few reads by primary key.
type treeHashes struct {
	ctx      context.Context
	q        store
	tenantID int64
	known    map[int64]tlog.Hash
	reads    int
}

func newTreeHashes(ctx context.Context, q store, tenantID int64) *treeHashes {
	return &treeHashes{ctx: ctx, q: q, tenantID: tenantID, known: map[int64]tlog.Hash{}}
}

// ReadHashes implements tlog.HashReader.
func (t *treeHashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	var seqs []int64
	for _, i := range indexes {
		if _, ok := t.known[i]; !ok {
			seq, _ := hashLocation(i)
			seqs = append(seqs, seq)
		}
	}
	if len(seqs) > 0 {
		t.reads++
		stored, err := t.q.leafHashes(t.ctx, t.tenantID, seqs)
		if err != nil {
			return nil, fmt.Errorf("read tree hashes of tenant %d: %w", t.tenantID, err)
		}
		for seq, hashes := range stored {
			t.remember(seq-1, hashes)
		}
	}
	out := make([]tlog.Hash, len(indexes))
	for k, i := range indexes {
		h, ok := t.known[i]
		if !ok {
			seq, pos := hashLocation(i)
			return nil, fmt.Errorf("tree hash %d (leaf %d, level %d) of tenant %d is not stored", i, seq, pos, t.tenantID)
		}
		out[k] = h
	}
	return out, nil
}

// edgeIndexes are the stored hash indexes of the right edge of the tree
// of size n, the roots of its complete subtrees, largest first. Appending
// to the tree and hashing its new root need no stored hash from before
// the batch but these: the others they need are the batch's own,
// remembered as it is appended.
func edgeIndexes(n int64) []int64 {
	var idx []int64
	var start int64
	for level := 62; level >= 0; level-- {
		if n>>level&1 == 1 {
			idx = append(idx, tlog.StoredHashIndex(level, start>>level))
			start += 1 << level
		}
	}
	return idx
}

// edgeSeqs are the seqs of the leaves whose rows store edgeIndexes(n).
func edgeSeqs(n int64) []int64 {
	idx := edgeIndexes(n)
	seqs := make([]int64, len(idx))
	for i, x := range idx {
		seqs[i], _ = hashLocation(x)
	}
	return seqs
}

// readEdge reads the right edge of the tree of size n in one statement,
// unless it is remembered already.
func (t *treeHashes) readEdge(n int64) error {
	idx := edgeIndexes(n)
	if len(idx) == 0 {
		return nil
	}
	_, err := t.ReadHashes(idx)
	return err
}

// remember records the hashes stored with record n (32 bytes each).
func (t *treeHashes) remember(n int64, hashes []byte) {
	base := tlog.StoredHashIndex(0, n)
	for j := 0; (j+1)*tlog.HashSize <= len(hashes); j++ {
		var h tlog.Hash
		copy(h[:], hashes[j*tlog.HashSize:])
		t.known[base+int64(j)] = h
	}
}

// joinHashes is the column value of one leaf's stored hashes.
func joinHashes(hs []tlog.Hash) []byte {
	b := make([]byte, 0, len(hs)*tlog.HashSize)
	for _, h := range hs {
		b = append(b, h[:]...)
	}
	return b
}

// compactTree is the right edge of a tree being rebuilt leaf by leaf from
// the start (verification, offline checks): the roots of its complete
// subtrees, largest first, O(log n) hashes whatever the size. Appending a
// leaf yields the same hashes tlog.StoredHashes stores for it, so the
// stored ones can be compared as the tree is rebuilt.
type compactTree struct {
	size  int64
	edges []tlog.Hash
}

// append adds the next leaf and returns the hashes its row should store.
func (c *compactTree) append(leaf tlog.Hash) []tlog.Hash {
	stored := []tlog.Hash{leaf}
	h := leaf
	for n := c.size; n&1 == 1; n >>= 1 {
		h = tlog.NodeHash(c.edges[len(c.edges)-1], h)
		c.edges = c.edges[:len(c.edges)-1]
		stored = append(stored, h)
	}
	c.edges = append(c.edges, h)
	c.size++
	return stored
}

// root is the RFC 6962 root of the leaves appended so far (zero for none,
// as tlog.TreeHash).
func (c *compactTree) root() tlog.Hash {
	if len(c.edges) == 0 {
		return tlog.Hash{}
	}
	h := c.edges[len(c.edges)-1]
	for i := len(c.edges) - 2; i >= 0; i-- {
		h = tlog.NodeHash(c.edges[i], h)
	}
	return h
}
