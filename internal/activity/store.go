package activity

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jejakhq/jejak/internal/queries"
)

// This file is the only one that touches the generated queries.

type store struct{ q *queries.Queries }

func newStore(db queries.DBTX) store { return store{queries.New(db)} }

func date(t time.Time) pgtype.Date {
	return pgtype.Date{Time: time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC), Valid: true}
}

// events returns events per day ("2006-01-02") from from on.
func (s store) events(ctx context.Context, tenantID int64, from time.Time) (map[string]int64, error) {
	rows, err := s.q.AuditDayCountList(ctx, queries.AuditDayCountListParams{TenantID: tenantID, FromDay: date(from)})
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Day.Time.Format(time.DateOnly)] = r.Events
	}
	return out, nil
}

// jobs returns succeeded, failed and dead attempts per day from from
// (local midnight in loc) on: the folded days, and the minutes since the
// last fold.
func (s store) jobs(ctx context.Context, tenantID int64, from time.Time, loc *time.Location) (map[string][3]int64, error) {
	rows, err := s.q.JobStatsDayList(ctx, queries.JobStatsDayListParams{
		TenantID: tenantID, FromDay: date(from), Zone: loc.String(), FromStart: from,
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string][3]int64, len(rows))
	for _, r := range rows {
		k := r.Day.Time.Format(time.DateOnly)
		v := out[k]
		v[0], v[1], v[2] = v[0]+r.Succeeded, v[1]+r.Failed, v[2]+r.Dead
		out[k] = v
	}
	return out, nil
}
