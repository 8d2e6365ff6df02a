// Package activity is a tenant's day-by-day figures for its owner's home:
// audit events per day and finished job attempts per day. Both come from
// small per-day rollups (audit_day_counts, kept by the audit sealer as it
// seals; job_stats_day plus the last two days of job_stats_minute),
// so a chart of 30 days reads at most a few hundred small rows whatever
// the size of the trail or the jobs table.
package activity

import (
	"context"
	"time"

	"github.com/jejakhq/jejak/internal/database"
)

// Day is one calendar day in the tenant's zone.
type Day struct {
	Date      time.Time // local midnight
	Events    int64
	Succeeded int64
	Failed    int64 // attempts that failed, dead letters included
	Dead      int64
}

// Days returns the last n days up to and including now's day in loc, oldest
// first, with a zero Day for days without activity, read in tx (a
// transaction scoped to tenantID: the owner's home reads them beside its
// projects).
func Days(ctx context.Context, tx database.Querier, tenantID int64, loc *time.Location, now time.Time, n int) ([]Day, error) {
	now = now.In(loc)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	from := today.AddDate(0, 0, -(n - 1))
	yesterday := today.AddDate(0, 0, -1)
	days := make([]Day, n)
	index := map[string]int{}
	for i := range days {
		days[i].Date = from.AddDate(0, 0, i)
		index[days[i].Date.Format(time.DateOnly)] = i
	}
	st := newStore(tx)
	events, err := st.events(ctx, tenantID, from)
	if err != nil {
		return nil, err
	}
	for d, v := range events {
		if i, ok := index[d]; ok {
			days[i].Events = v
		}
	}
	jobs, err := st.jobs(ctx, tenantID, from, yesterday, loc)
	if err != nil {
		return nil, err
	}
	for d, v := range jobs {
		if i, ok := index[d]; ok {
			days[i].Succeeded += v[0]
			days[i].Failed += v[1]
			days[i].Dead += v[2]
		}
	}
	return days, nil
}
