// Package activity is a tenant's day-by-day figures for its owner's home:
// audit events per day and finished job attempts per day. Both come from
// small per-day rollups (audit_day_counts, kept by the audit sealer as it
// seals; job_stats_day plus the minutes of job_stats_minute its last fold
// did not reach), so a chart of 30 days reads at most a few hundred small
// rows whatever the size of the trail or the jobs table.
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

// Chart is the last n days up to and including now's day in loc, as the
// owner's home draws them. Its reads fill it; Days returns its days once
// they have run.
type Chart struct {
	tenantID int64
	loc      *time.Location
	from     time.Time
	n        int
	events   map[string]int64
	jobs     map[string][3]int64
}

// NewChart returns tenantID's chart of the n days up to now's day in loc.
func NewChart(tenantID int64, loc *time.Location, now time.Time, n int) *Chart {
	now = now.In(loc)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	return &Chart{tenantID: tenantID, loc: loc, from: today.AddDate(0, 0, -(n - 1)), n: n}
}

// Reads returns the chart's two reads, each one statement on db (scoped to
// the tenant): the events per day and the jobs' outcomes per day. They
// are independent, so database.ReadTenantAll can send them with the
// page's other reads.
func (c *Chart) Reads(ctx context.Context) []database.Read {
	return []database.Read{
		func(db database.Querier) (err error) {
			c.events, err = newStore(db).events(ctx, c.tenantID, c.from)
			return err
		},
		func(db database.Querier) (err error) {
			c.jobs, err = newStore(db).jobs(ctx, c.tenantID, c.from, c.loc)
			return err
		},
	}
}

// Days returns the chart's days, oldest first, with a zero Day for days
// without activity.
func (c *Chart) Days() []Day {
	days := make([]Day, c.n)
	index := make(map[string]int, c.n)
	for i := range days {
		days[i].Date = c.from.AddDate(0, 0, i)
		index[days[i].Date.Format(time.DateOnly)] = i
	}
	for d, v := range c.events {
		if i, ok := index[d]; ok {
			days[i].Events = v
		}
	}
	for d, v := range c.jobs {
		if i, ok := index[d]; ok {
			days[i].Succeeded += v[0]
			days[i].Failed += v[1]
			days[i].Dead += v[2]
		}
	}
	return days
}
