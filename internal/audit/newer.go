package audit

import (
	"context"
	"encoding/json"

	"github.com/jejakhq/jejak/internal/keyset"
)

// Newer returns tenantID's events after afterSeq that match f, oldest first,
// at most limit of them, and the sequence number the caller has now seen
// through: pass it as afterSeq next time. It is the live timeline's poll, so
// it stays cheap whatever the trail's size: the newest seq is one primary-key
// probe, and when nothing arrived that is all it reads; otherwise it walks
// only the primary-key range (afterSeq, newest]. Reporting "through" rather
// than the last matching seq keeps a filtered poll from rescanning the same
// non-matching events each time.
func Newer(ctx context.Context, db DB, tenantID int64, f Filter, afterSeq int64, limit int) ([]Recorded, int64, error) {
	limit = keyset.Limit(limit)
	last, err := newStore(db).lastSeq(ctx, tenantID)
	if err != nil {
		return nil, afterSeq, wrapf(err, "read newest audit seq of tenant %d", tenantID)
	}
	if last <= afterSeq {
		// Nothing new (or a cursor from the future): restart from the head.
		return nil, last, nil
	}
	// A tenant's events commit in seq order (writers hold the head lock
	// until commit), so every seq up to last is visible now.
	rows, err := newFilteredStore(db).scan(ctx, tenantID, f, afterSeq, last, limit)
	if err != nil {
		return nil, afterSeq, wrapf(err, "read audit events of tenant %d after seq %d", tenantID, afterSeq)
	}
	through := last
	if len(rows) == limit {
		through = rows[len(rows)-1].Seq
	}
	out := make([]Recorded, len(rows))
	for i := range rows {
		r := &rows[i]
		out[i] = Recorded{
			Event: Event{
				TenantID: r.TenantID, ActorKind: ActorKind(r.ActorKind), ActorID: r.ActorID,
				Action: r.Action, Entity: r.Entity, EntityID: r.EntityID,
				Detail: json.RawMessage(r.DetailText), TraceID: r.TraceID, JobID: r.JobID,
			},
			Seq: r.Seq, ID: r.ID, OccurredAt: r.OccurredAt, Hash: r.Hash, PrevHash: r.PrevHash,
		}
	}
	return out, through, nil
}
