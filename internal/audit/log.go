package audit

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/jejakhq/jejak/internal/apperr"
)

// Errors of the log's proofs.
var (
	// ErrNoCheckpoint: the tenant's log has no signed checkpoint yet.
	ErrNoCheckpoint = apperr.NotFound("this trail has no signed checkpoint yet")
	// ErrBeyondLog: a seq or tree size outside the signed log (beyond()
	// makes one with the details; match with errors.Is).
	ErrBeyondLog = errors.New("beyond the log")
)

// beyondLog is a request for a seq or size outside the log: bad input,
// answered 400 with what the log holds.
type beyondLog struct{ err *apperr.Error }

func (b beyondLog) Error() string      { return b.err.Message }
func (beyondLog) Is(target error) bool { return target == ErrBeyondLog }
func (b beyondLog) Unwrap() error      { return b.err }

func beyond(format string, args ...any) error {
	return beyondLog{apperr.Malformed(fmt.Sprintf(format, args...))}
}

// SignedTree is a tenant's latest signed checkpoint.
type SignedTree struct {
	Size int64
	Root []byte
	Note string
}

// LatestCheckpoint returns tenantID's newest signed checkpoint (inside a
// tenant-scoped or system transaction).
func LatestCheckpoint(ctx context.Context, db DB, tenantID int64) (SignedTree, error) {
	cp, ok, err := newStore(db).latestCheckpoint(ctx, tenantID)
	if err != nil {
		return SignedTree{}, wrapf(err, "read latest checkpoint of tenant %d", tenantID)
	}
	if !ok {
		return SignedTree{}, ErrNoCheckpoint
	}
	return cp, nil
}

// InclusionProof proves that the leaf at Seq is in the tree the
// checkpoint signs (RFC 6962 audit path, leaf index Seq-1).
type InclusionProof struct {
	Seq        int64
	TreeSize   int64
	LeafHash   tlog.Hash
	Hashes     []tlog.Hash
	Checkpoint string
}

// ProveInclusion proves leaf seq of tenantID against its latest
// checkpoint. A seq outside 1..size of that checkpoint is ErrBeyondLog.
func ProveInclusion(ctx context.Context, db DB, tenantID, seq int64) (InclusionProof, error) {
	cp, err := LatestCheckpoint(ctx, db, tenantID)
	if err != nil {
		return InclusionProof{}, err
	}
	if seq < 1 || seq > cp.Size {
		return InclusionProof{}, beyond("seq %d is not in the signed tree of size %d", seq, cp.Size)
	}
	th := newTreeHashes(ctx, newStore(db), tenantID)
	hashes, err := tlog.ProveRecord(cp.Size, seq-1, th)
	if err != nil {
		return InclusionProof{}, wrapf(err, "prove leaf %d of tenant %d", seq, tenantID)
	}
	leafHash, err := th.ReadHashes([]int64{tlog.StoredHashIndex(0, seq-1)})
	if err != nil {
		return InclusionProof{}, err
	}
	return InclusionProof{Seq: seq, TreeSize: cp.Size, LeafHash: leafHash[0], Hashes: hashes, Checkpoint: cp.Note}, nil
}

// ProveConsistency proves that tenantID's tree of size to extends its
// tree of size from (RFC 6962 consistency proof); 1 ≤ from ≤ to ≤ the
// tree's size, else ErrBeyondLog.
func ProveConsistency(ctx context.Context, db DB, tenantID, from, to int64) ([]tlog.Hash, error) {
	q := newStore(db)
	tree, err := q.tree(ctx, tenantID)
	if err != nil {
		return nil, wrapf(err, "read tree of tenant %d", tenantID)
	}
	if from < 1 || from > to || to > tree.Size {
		return nil, beyond("want 1 ≤ from ≤ to ≤ %d, got from=%d to=%d", tree.Size, from, to)
	}
	hashes, err := tlog.ProveTree(to, from, newTreeHashes(ctx, q, tenantID))
	if err != nil {
		return nil, wrapf(err, "prove tree %d extends %d for tenant %d", to, from, tenantID)
	}
	return hashes, nil
}

// LeafEntry returns the canonical encoding of leaf seq: the bytes whose
// SHA-256 after a 0x00 byte is the leaf hash.
func LeafEntry(ctx context.Context, db DB, tenantID, seq int64) ([]byte, error) {
	if seq < 1 {
		return nil, beyond("seq %d is not in the log", seq)
	}
	ls, err := newStore(db).leaves(ctx, tenantID, seq-1, seq, 1)
	if err != nil {
		return nil, wrapf(err, "read leaf %d of tenant %d", seq, tenantID)
	}
	if len(ls) == 0 {
		return nil, beyond("seq %d is not sealed", seq)
	}
	if !ls[0].Present {
		return nil, ErrNotFound
	}
	return ls[0].entry(), nil
}
