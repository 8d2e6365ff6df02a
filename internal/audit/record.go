package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/reqctx"
)

// Record appends e to its tenant's chain inside the caller's transaction,
// so the event commits or rolls back with the change it describes: a trail
// that could miss a committed change, or record one that rolled back,
// would not be evidence.
// tx is a tenant-scoped jejak_app transaction (database.InTenantTx) for
// e.TenantID, or a jejak_system transaction. The tenant's head row stays
// locked until tx ends: keep such transactions short. tx must run at READ
// COMMITTED (the default); at a stricter level a concurrent append to the
// same tenant fails with a serialization error.
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
		// The column stores microseconds; the clock's reading is cut to
		// that here so the hash covers exactly what is stored.
		t := now.UTC().Truncate(time.Microsecond)
		now = &t
	}
	s := newStore(tx)
	head, err := s.lockHead(ctx, e.TenantID, now, detail)
	if errors.Is(err, errNoHead) {
		// First event of this tenant: create the empty head (a concurrent
		// first writer makes this a no-op) and lock it.
		if err := s.createHead(ctx, e.TenantID); err != nil {
			return Recorded{}, wrapf(err, "create audit head of tenant %d", e.TenantID)
		}
		head, err = s.lockHead(ctx, e.TenantID, now, detail)
	}
	if err != nil {
		return Recorded{}, wrapf(err, "lock audit head of tenant %d", e.TenantID)
	}

	rec := Recorded{
		Event:      e,
		Seq:        head.Seq + 1,
		OccurredAt: head.OccurredAt.UTC(),
		PrevHash:   head.Hash,
	}
	rec.Detail = json.RawMessage(head.DetailText)
	rec.Hash = eventHash(rec.chainFields(head.DetailText))
	if rec.ID, err = s.insert(ctx, &rec); err != nil {
		return Recorded{}, fmt.Errorf("insert audit event %s of tenant %d: %w", e.Action, e.TenantID, err)
	}
	return rec, nil
}

// chainFields returns what the hash of r covers; detailText is jsonb's
// canonical text of r.Detail.
func (r *Recorded) chainFields(detailText string) *chainFields {
	return &chainFields{
		TenantID:   r.TenantID,
		Seq:        r.Seq,
		ActorKind:  string(r.ActorKind),
		ActorID:    r.ActorID,
		Action:     r.Action,
		Entity:     r.Entity,
		EntityID:   r.EntityID,
		DetailText: detailText,
		OccurredAt: r.OccurredAt,
		TraceID:    r.TraceID,
		JobID:      r.JobID,
		PrevHash:   r.PrevHash,
	}
}
