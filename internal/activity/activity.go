// Package activity is a tenant's day-by-day figures for its owner's home:
// audit events per day and finished job attempts per day. Both come from
// small per-day rollups (audit_day_counts, kept by a trigger on every
// audit insert; job_stats_day plus the last two days of job_stats_minute),
// so a chart of 30 days reads at most a few hundred small rows whatever
// the size of the trail or the jobs table.
package activity

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

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

// Service reads the figures through the tenant-facing pool.
type Service struct{ app database.Pool }

// NewService returns a Service over the tenant-facing pool.
func NewService(app database.Pool) *Service { return &Service{app: app} }

// Days returns the last n days up to and including now's day in loc, oldest
// first, with a zero Day for days without activity.
func (s *Service) Days(ctx context.Context, tenantID int64, loc *time.Location, now time.Time, n int) ([]Day, error) {
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
	err := database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		st := newStore(tx)
		events, err := st.events(ctx, tenantID, from)
		if err != nil {
			return err
		}
		for d, v := range events {
			if i, ok := index[d]; ok {
				days[i].Events = v
			}
		}
		jobs, err := st.jobs(ctx, tenantID, from, yesterday, loc)
		if err != nil {
			return err
		}
		for d, v := range jobs {
			if i, ok := index[d]; ok {
				days[i].Succeeded += v[0]
				days[i].Failed += v[1]
				days[i].Dead += v[2]
			}
		}
		return nil
	})
	return days, err
}
