package audit

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
)

// LockHeads locks the audit heads of several tenants, creating missing
// ones, in ascending tenant_id order. A transaction that records events
// for more than one tenant must call it before its first Record: Record
// locks one head at a time in whatever order the caller's events come, and
// two such transactions taking the same tenants in opposite orders (a
// sign-in recorded in each of the user's tenants, a bulk operator batch
// over dead letters of many tenants) deadlock. Heads already locked by tx
// are locked again at no cost.
func (r *Recorder) LockHeads(ctx context.Context, tx pgx.Tx, tenantIDs []int64) error {
	ids := slices.Clone(tenantIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) < 2 {
		return nil // one head: Record's own lock is already ordered
	}
	s := newStore(tx)
	heads, err := s.lockHeads(ctx, ids)
	if err != nil {
		return wrapf(err, "lock audit heads")
	}
	if len(heads) == len(ids) {
		return nil
	}
	// First events of some tenants: create their heads, then lock the
	// whole set again in order. Creating takes the new row's lock, so the
	// creation itself follows tenant order too.
	for _, id := range ids {
		if _, ok := heads[id]; ok {
			continue
		}
		if err := s.createHead(ctx, id); err != nil {
			return wrapf(err, "create audit head of tenant %d", id)
		}
	}
	if _, err := s.lockHeads(ctx, ids); err != nil {
		return wrapf(err, "lock audit heads")
	}
	return nil
}
