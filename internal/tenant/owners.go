package tenant

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
)

// Errors of the last-owner rule.
var (
	// ErrLastOwner: the change would leave the tenant without an active owner.
	ErrLastOwner = apperr.Invalid("role", "A tenant needs at least one owner.")
	// ErrNoLongerOwner: the acting owner stopped being one while the request
	// waited for the owner lock (another change committed first).
	ErrNoLongerOwner = &apperr.Error{Code: apperr.CodeConflict,
		Message: "Your role changed meanwhile: you are no longer an owner. Reload the page."}
)

// KeepOwner is the last-owner rule, checked where two transactions cannot
// both pass it: it locks the tenant's owner memberships for the rest of tx
// (MembershipLockOwners), so concurrent demotions, removals and disables of
// owners run one after the other and each sees what the previous committed.
// It refuses with ErrLastOwner when leaving (0 = nobody) is the only active
// owner, and with ErrNoLongerOwner when actor (0 = not checked, e.g. staff
// or a job) is no longer an active owner. Every change that can take an
// owner away calls it in its own transaction before changing anything.
func KeepOwner(ctx context.Context, tx pgx.Tx, tenantID, actor, leaving int64) error {
	active, err := newStore(tx).lockOwners(ctx, tenantID)
	if err != nil {
		return err
	}
	if leaving != 0 && slices.Contains(active, leaving) && len(active) == 1 {
		return ErrLastOwner
	}
	if actor != 0 && !slices.Contains(active, actor) {
		return ErrNoLongerOwner
	}
	return nil
}
