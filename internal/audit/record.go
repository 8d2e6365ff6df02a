package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/reqctx"
)

// Record appends e to its tenant's log inside the caller's transaction, so
// the event commits or rolls back with the change it describes: a trail
// that could miss a committed change, or record one that rolled back,
// would not be evidence.
// tx is a tenant-scoped jejak_app transaction (database.InTenantTx) for
// e.TenantID, or a jejak_system transaction. Recording is one insert: it
// takes no lock that the tenant's other writers take, so any number of
// them commit side by side. The event shows in the tenant's timeline as
// soon as tx commits; the Sealer gives it its seq and seals it into the
// tenant's Merkle tree shortly after (Recorded.Seq is 0 until then).
//
// An invalid event returns ErrInvalid without touching the database.
func (r *Recorder) Record(ctx context.Context, tx pgx.Tx, e Event) (Recorded, error) {
	if e.TraceID == "" {
		// The request or job being served: its trace follows what it causes.
		e.TraceID = reqctx.Trace(ctx)
	}
	detail, err := e.validate()
	if err != nil {
		return Recorded{}, err
	}
	now := r.clk.Now()
	if now != nil {
		// The column stores microseconds.
		t := now.UTC().Truncate(time.Microsecond)
		now = &t
	}
	rec, err := newStore(tx).insert(ctx, &e, detail, now)
	if err != nil {
		return Recorded{}, fmt.Errorf("insert audit event %s of tenant %d: %w", e.Action, e.TenantID, err)
	}
	return rec, nil
}
