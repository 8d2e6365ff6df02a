package audit

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// WorkDone is something a worker did for a tenant, recorded in the
// tenant's trail with the system as actor, so the owner's question "what
// did the nightly worker do to my account?" is answered by the timeline.
type WorkDone struct {
	TenantID int64
	Action   string // e.g. "subscription.status_changed"
	Entity   string
	EntityID string
	Detail   map[string]any
	TraceID  string // the job's trace
	JobID    int64
}

// RecordWork records w in tx (the transaction of the work itself).
func (r *Recorder) RecordWork(ctx context.Context, tx pgx.Tx, w WorkDone) error {
	e, err := w.event()
	if err != nil {
		return err
	}
	if err := r.Append(ctx, tx, e); err != nil {
		return fmt.Errorf("audit %s: %w", w.Action, err)
	}
	return nil
}

// RecordWorks records ws in tx with one statement, for a worker that did
// many things in one transaction.
func (r *Recorder) RecordWorks(ctx context.Context, tx pgx.Tx, ws []WorkDone) error {
	events := make([]Event, len(ws))
	for i, w := range ws {
		e, err := w.event()
		if err != nil {
			return err
		}
		events[i] = e
	}
	return r.AppendMany(ctx, tx, events)
}

func (w WorkDone) event() (Event, error) {
	raw, err := json.Marshal(w.Detail)
	if err != nil {
		return Event{}, fmt.Errorf("encode %s detail: %w", w.Action, err)
	}
	var job *int64
	if w.JobID > 0 {
		job = &w.JobID
	}
	return Event{TenantID: w.TenantID, ActorKind: ActorSystem, Action: w.Action, Entity: w.Entity,
		EntityID: w.EntityID, Detail: raw, TraceID: w.TraceID, JobID: job}, nil
}
