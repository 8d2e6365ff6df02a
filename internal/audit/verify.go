package audit

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/jejakhq/jejak/internal/database"
)

// VerifyResult is the outcome of checking one tenant's log.
type VerifyResult struct {
	TenantID int64
	// OK is true when every leaf from 1 to the tree's size recomputes from
	// its event, the tree's root and every checkpoint's root recompute
	// from the leaves, every checkpoint's signature holds, and no event is
	// hidden from the log.
	OK bool
	// CheckedThrough is the last seq found intact.
	CheckedThrough int64
	// FirstBadSeq is the first seq that is missing, altered, out of place
	// or not covered by the checkpoints it should be (0 when OK).
	FirstBadSeq int64
	// Reason says what is wrong at FirstBadSeq ("" when OK).
	Reason string
	// TreeSize and Root are the tenant's tree as stored.
	TreeSize int64
	Root     []byte
}

// AnchorPoint is a tree state recorded outside the database: a signed
// checkpoint's size and root, or a v1 chain anchor's seq and hash.
type AnchorPoint struct {
	Size int64
	Root []byte
	// V1Seq and V1Hash are a v1 anchor (the chain's head hash at V1Seq).
	V1Seq  int64
	V1Hash []byte
}

// VerifyOptions adds what the database cannot vouch for itself.
type VerifyOptions struct {
	// VerifierKey checks every stored checkpoint's signature ("" checks
	// only that each checkpoint's text matches the tree).
	VerifierKey string
	// Anchors are states of this tenant's log kept outside the database.
	Anchors []AnchorPoint
}

// verifyBatch is how many leaves Verify holds in memory at once.
const verifyBatch = 5000

// Verify checks tenantID's log with no outside anchors; see VerifyWith.
func Verify(ctx context.Context, db TxBeginner, tenantID int64) (VerifyResult, error) {
	return VerifyWith(ctx, db, tenantID, VerifyOptions{})
}

// VerifyWith walks tenantID's leaves in seq order, in batches, recomputing
// every leaf hash from its event and every stored tree hash, and the roots
// the tree, its checkpoints and opts.Anchors commit to; it reports the
// first bad seq. It reads in one REPEATABLE READ snapshot so the sealer
// does not disturb it; db is the app pool (scoped to tenantID here) or the
// system pool. The error is for failures to read, not for a broken log.
func VerifyWith(ctx context.Context, db TxBeginner, tenantID int64, opts VerifyOptions) (VerifyResult, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return VerifyResult{}, wrapf(err, "begin audit verification of tenant %d", tenantID)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only
	if err := database.ScopeTx(ctx, tx, tenantID); err != nil {
		return VerifyResult{}, wrapf(err, "scope audit verification to tenant %d", tenantID)
	}
	return verifyTx(ctx, tx, tenantID, opts)
}

// commitment is one tree state the leaves must reproduce.
type commitment struct {
	size int64
	root []byte
	what string // "checkpoint", "anchor"
	bad  string // set when the commitment itself is invalid
}

func verifyTx(ctx context.Context, db DB, tenantID int64, opts VerifyOptions) (VerifyResult, error) {
	s := newStore(db)
	res := VerifyResult{TenantID: tenantID}
	tree, err := s.tree(ctx, tenantID)
	if err != nil {
		return res, wrapf(err, "read audit tree of tenant %d", tenantID)
	}
	res.TreeSize, res.Root = tree.Size, tree.Root
	cps, err := s.checkpoints(ctx, tenantID)
	if err != nil {
		return res, wrapf(err, "read checkpoints of tenant %d", tenantID)
	}
	last, err := s.lastLeaf(ctx, tenantID)
	if err != nil {
		return res, wrapf(err, "read last leaf of tenant %d", tenantID)
	}
	v := newVerifier(cps, opts)
	if n := len(v.commits); n > 0 && v.commits[n-1].size > tree.Size {
		c := v.commits[n-1]
		return res.failed(faultf(tree.Size+1, "the tree was rewound: it holds %d leaves, a signed %s covers %d", tree.Size, c.what, c.size)), nil
	}
	if f := v.reach(); f != nil { // commitments of size 0
		return res.failed(f), nil
	}
	f, err := v.walk(ctx, s, tenantID, max(tree.Size, last), &res.CheckedThrough)
	if err != nil {
		return res, err
	}
	if f == nil {
		f = v.matches(tree, res.CheckedThrough)
	}
	if f != nil {
		return res.failed(f), nil
	}
	hidden, err := s.orphans(ctx, tenantID)
	if err != nil {
		return res, wrapf(err, "count hidden events of tenant %d", tenantID)
	}
	if hidden > 0 {
		return res.failed(faultf(tree.Size+1, "%d event(s) in audit_sealed are no leaf of the log (put there by hand)", hidden)), nil
	}
	res.OK = true
	return res, nil
}

// fault is the first thing found wrong with a log: where and what.
type fault struct {
	seq    int64
	reason string
}

func faultf(seq int64, format string, args ...any) *fault {
	return &fault{seq: seq, reason: fmt.Sprintf(format, args...)}
}

// failed is r reporting f.
func (r VerifyResult) failed(f *fault) VerifyResult {
	r.OK, r.FirstBadSeq, r.Reason = false, f.seq, f.reason
	return r
}

// verifier recomputes a tenant's tree leaf by leaf and checks each
// commitment when the tree reaches its size.
type verifier struct {
	commits   []commitment // by size
	next      int          // commits[next] is the next one to reach
	v1Anchors map[int64][]byte
	prevV1    []byte // the v1 chain's hash so far
	ct        compactTree
	// good is the largest size confirmed so far by a commitment: a broken
	// commitment means the log went wrong after it.
	good int64
}

// newVerifier holds the stored checkpoints and opts' anchors as
// commitments ordered by size.
func newVerifier(cps []SignedTree, opts VerifyOptions) *verifier {
	v := &verifier{v1Anchors: map[int64][]byte{}, prevV1: genesisHash}
	for _, c := range cps {
		v.commits = append(v.commits, commitment{size: c.Size, root: c.Root, what: "checkpoint", bad: checkNote(c.Note, opts.VerifierKey, c.Size, c.Root)})
	}
	for _, a := range opts.Anchors {
		if a.V1Seq > 0 {
			v.v1Anchors[a.V1Seq] = a.V1Hash
			v.commits = append(v.commits, commitment{size: a.V1Seq, what: "v1 anchor"})
			continue
		}
		v.commits = append(v.commits, commitment{size: a.Size, root: a.Root, what: "anchor"})
	}
	slices.SortStableFunc(v.commits, func(a, b commitment) int { return int(a.size - b.size) })
	return v
}

// reach checks the commitments of the tree's current size. Several may
// share a size (a checkpoint and its anchor, or two anchors when a tail was
// rewritten): a mismatch in any of them puts the fault after the last size
// confirmed before.
func (v *verifier) reach() *fault {
	base := v.good
	for v.next < len(v.commits) && v.commits[v.next].size == v.ct.size {
		c := v.commits[v.next]
		v.next++
		switch {
		case c.bad != "":
			return faultf(base+1, "%s of size %d: %s", c.what, c.size, c.bad)
		case c.root != nil && !sameRoot(c.root, v.ct.root()):
			return faultf(base+1, "the leaves after seq %d do not match the %s of size %d (the log was rewritten)", base, c.what, c.size)
		}
		v.good = c.size
	}
	return nil
}

// walk reads leaves 1 to through in batches, adding each to the tree and
// checking it and the commitments it reaches; checked is the last seq found
// intact.
func (v *verifier) walk(ctx context.Context, s store, tenantID, through int64, checked *int64) (*fault, error) {
	want := int64(1)
	for want <= through {
		rows, err := s.leaves(ctx, tenantID, want-1, through, verifyBatch)
		if err != nil {
			return nil, wrapf(err, "read audit leaves of tenant %d after seq %d", tenantID, want-1)
		}
		if len(rows) == 0 {
			break
		}
		for i := range rows {
			if f := v.leaf(&rows[i], want); f != nil {
				return f, nil
			}
			if f := v.reach(); f != nil {
				return f, nil
			}
			*checked = want
			want++
		}
	}
	return nil, nil
}

// leaf checks stored leaf r, expected at seq want, against its event and
// the tree so far, and adds it to the tree.
func (v *verifier) leaf(r *leaf, want int64) *fault {
	if r.Seq != want {
		return faultf(want, "leaf %d is missing (next stored leaf is %d)", want, r.Seq)
	}
	if !r.Present {
		return faultf(want, "the event sealed at seq %d (event %d) was deleted", want, r.EventID)
	}
	if r.V1 {
		h := eventHash(&r.chainFields)
		if !bytes.Equal(r.PrevHash, v.prevV1) || !bytes.Equal(h, r.V1Hash) {
			return faultf(want, "v1 event %d was altered, deleted or reordered (its chain does not hold)", want)
		}
		if a, ok := v.v1Anchors[want]; ok && !bytes.Equal(a, h) {
			return faultf(want, "v1 event %d does not match its anchor", want)
		}
		v.prevV1 = h
	}
	stored := joinHashes(v.ct.append(tlog.RecordHash(r.entry())))
	switch {
	case !bytes.Equal(stored[:tlog.HashSize], r.Hashes[:min(len(r.Hashes), tlog.HashSize)]):
		return faultf(want, "event %d (seq %d) was altered, moved or swapped after it was sealed (its leaf hash differs)", r.EventID, want)
	case !bytes.Equal(stored, r.Hashes):
		return faultf(want, "the stored tree hashes of leaf %d were altered", want)
	}
	return nil
}

// matches says what is wrong when the leaves checked through seq checked do
// not make up the stored tree (nil when they do).
func (v *verifier) matches(tree logTree, checked int64) *fault {
	switch {
	case checked < tree.Size:
		return faultf(checked+1, "leaves %d to %d are missing (the tree holds %d)", checked+1, tree.Size, tree.Size)
	case checked > tree.Size:
		return faultf(tree.Size+1, "leaves %d to %d lie beyond the tree (size %d)", tree.Size+1, checked, tree.Size)
	case tree.Size > 0 && !sameRoot(tree.Root, v.ct.root()):
		return faultf(v.good+1, "the tree's stored root does not match its leaves")
	}
	return nil
}

// checkNote says what is wrong with a stored checkpoint ("" when it
// signs size and root, under vkey when given).
func checkNote(signed, vkey string, size int64, root []byte) string {
	var cp Checkpoint
	var err error
	if vkey != "" {
		cp, err = OpenCheckpoint([]byte(signed), vkey, "")
	} else {
		text, _, ok := strings.Cut(signed, "\n\n")
		if !ok {
			return "not a signed note"
		}
		cp, err = ParseCheckpointText(text + "\n")
	}
	switch {
	case err != nil:
		return err.Error()
	case cp.Size != size || !sameRoot(root, cp.Root):
		return "its note signs another tree than the one stored beside it"
	}
	return ""
}

// VerifyAll verifies every tenant's log through the system pool, one
// snapshot per tenant, each against its anchors, and returns one result
// per tenant in id order.
func VerifyAll(ctx context.Context, system interface {
	TxBeginner
	DB
}, vkey string, anchors map[int64][]AnchorPoint) ([]VerifyResult, error) {
	ids, err := newStore(system).tenantIDs(ctx)
	if err != nil {
		return nil, wrapf(err, "list tenants to verify")
	}
	out := make([]VerifyResult, 0, len(ids))
	for _, id := range ids {
		r, err := VerifyWith(ctx, system, id, VerifyOptions{VerifierKey: vkey, Anchors: anchors[id]})
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}
