package audit

import (
	"context"

	"github.com/jejakhq/jejak/internal/keyset"
)

// Newer returns tenantID's events with an id above afterID that match f,
// oldest first, at most limit of them, and the id the caller has now seen
// through: pass it as afterID next time. It is the live timeline's poll,
// so it stays cheap whatever the trail's size: the newest id is one
// primary-key probe, and when nothing arrived that is all it reads;
// otherwise it walks only the ids in (afterID, newest]. Reporting
// "through" rather than the last matching id keeps a filtered poll from
// rescanning the same non-matching events each time.
//
// Ids are taken when events are inserted, not when they commit, so a
// transaction that commits after a later one's poll shows its event on
// the next full page load, not in the live poll: the poll is a view, the
// log itself (the sealer's queue) misses nothing.
func Newer(ctx context.Context, db DB, tenantID int64, f Filter, afterID int64, limit int) ([]Recorded, int64, error) {
	limit = keyset.Limit(limit)
	last, err := newStore(db).lastID(ctx, tenantID)
	if err != nil {
		return nil, afterID, wrapf(err, "read newest audit event of tenant %d", tenantID)
	}
	if last <= afterID {
		// Nothing new (or a cursor from the future): restart from the newest.
		return nil, last, nil
	}
	rows, err := newFilteredStore(db).newer(ctx, tenantID, f, afterID, last, limit)
	if err != nil {
		return nil, afterID, wrapf(err, "read audit events of tenant %d after %d", tenantID, afterID)
	}
	through := last
	if len(rows) == limit {
		through = rows[len(rows)-1].ID
	}
	return rows, through, nil
}
