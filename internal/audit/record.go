package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
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
	detail, now, err := r.prepare(ctx, &e)
	if err != nil {
		return Recorded{}, err
	}
	rec, err := newStore(tx).insert(ctx, &e, detail, now)
	if err != nil {
		return Recorded{}, fmt.Errorf("insert audit event %s of tenant %d: %w", e.Action, e.TenantID, err)
	}
	return rec, nil
}

// Append is Record for a writer that does not need the stored event back:
// the insert is queued to be sent with tx's COMMIT (database.AtCommit), so
// an audited change costs the transaction no extra round trip. Atomicity
// is Record's: should the insert fail, the commit fails and the change
// rolls back with it. An invalid event returns ErrInvalid at once.
func (r *Recorder) Append(ctx context.Context, tx pgx.Tx, e Event) error {
	return r.AppendMany(ctx, tx, []Event{e})
}

// AppendMany is Append for many events, inserted by one statement queued
// for tx's COMMIT. Every event is validated before anything is queued.
func (r *Recorder) AppendMany(ctx context.Context, tx pgx.Tx, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	details := make([][]byte, len(events))
	var now *time.Time
	for i := range events {
		d, t, err := r.prepare(ctx, &events[i])
		if err != nil {
			return err
		}
		details[i], now = d, t
	}
	if err := newStore(database.AtCommit(tx)).appendMany(ctx, events, details, now); err != nil {
		return fmt.Errorf("insert audit events of tenant %d (%s, %d in all): %w", events[0].TenantID, events[0].Action, len(events), err)
	}
	return nil
}

// prepare fills e's trace from ctx, validates e and returns its detail and
// the time to store (nil: the database's now()).
func (r *Recorder) prepare(ctx context.Context, e *Event) ([]byte, *time.Time, error) {
	if e.TraceID == "" {
		// The request or job being served: its trace follows what it causes.
		e.TraceID = reqctx.Trace(ctx)
	}
	detail, err := e.validate()
	if err != nil {
		return nil, nil, err
	}
	now := r.clk.Now()
	if now != nil {
		// The column stores microseconds.
		t := now.UTC().Truncate(time.Microsecond)
		now = &t
	}
	return detail, now, nil
}
