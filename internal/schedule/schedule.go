// Package schedule runs Jejak's periodic work: the subscription
// sweep daily, the weekly report per tenant weekly, payment reconciliation
// daily, and the job and outbox retention prunes hourly. Only the job
// engine's maintenance leader
// ticks the scheduler, and each schedule runs exactly once per period
// across replicas: the period is part of a key that is claimed with
// INSERT … ON CONFLICT DO NOTHING in the same transaction as the jobs it
// enqueues (whose idempotency keys carry the period too), so even two
// replicas that both think they lead schedule a period once.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/sensitive"
)

// Every is a schedule's period.
type Every string

// Periods, aligned to UTC: days start at 00:00, weeks on Monday 00:00.
const (
	Hourly Every = "hourly"
	Daily  Every = "daily"
	Weekly Every = "weekly"
)

// Period is one occurrence of a schedule.
type Period struct {
	Key   string // e.g. "2026-03-02", "2026-W10", "2026-03-02T08"
	Start time.Time
	End   time.Time
}

// PeriodAt returns the period of e that contains t.
func PeriodAt(e Every, t time.Time) Period {
	t = t.UTC()
	switch e {
	case Hourly:
		s := t.Truncate(time.Hour)
		return Period{Key: s.Format("2006-01-02T15"), Start: s, End: s.Add(time.Hour)}
	case Weekly:
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		back := (int(d.Weekday()) + 6) % 7 // days since Monday
		s := d.AddDate(0, 0, -back)
		y, w := s.ISOWeek()
		return Period{Key: fmt.Sprintf("%d-W%02d", y, w), Start: s, End: s.AddDate(0, 0, 7)}
	default:
		s := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return Period{Key: s.Format("2006-01-02"), Start: s, End: s.AddDate(0, 0, 1)}
	}
}

// Action does a schedule's work for one period inside the transaction that
// claimed the period (normally: enqueue jobs keyed by the period). It
// returns how many jobs it enqueued and a short summary.
type Action func(ctx context.Context, tx pgx.Tx, p Period) (jobs int, summary string, err error)

// Schedule is one periodic task.
type Schedule struct {
	Name   string
	Every  Every
	Action Action
	// About says what it does, in English; the dashboard shows the
	// catalog entry schedule.<Name>.desc formatted with AboutArgs (a
	// time.Duration among them is shown in words).
	About     string
	AboutArgs []any
}

// Scheduler ticks schedules.
type Scheduler struct {
	pool      database.Pool
	clock     clock.Clock
	schedules []Schedule
	workerID  string
}

// New returns a Scheduler over the system pool.
func New(pool database.Pool, c clock.Clock, workerID string, schedules ...Schedule) *Scheduler {
	if c == nil {
		c = clock.Database{}
	}
	return &Scheduler{pool: pool, clock: c, schedules: schedules, workerID: workerID}
}

// Schedules returns the configured schedules.
func (s *Scheduler) Schedules() []Schedule { return s.schedules }

// Tick runs every schedule whose current period has not run yet and
// reports how many periods it claimed. Safe to call from several replicas
// at once: each period is claimed once.
func (s *Scheduler) Tick(ctx context.Context) (int, error) {
	ran := 0
	var errs []error
	for _, sc := range s.schedules {
		ok, err := s.tickOne(ctx, sc)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", sc.Name, err))
		}
		if ok {
			ran++
		}
	}
	return ran, errors.Join(errs...)
}

func (s *Scheduler) tickOne(ctx context.Context, sc Schedule) (bool, error) {
	claimed := false
	err := database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		now, err := sensitive.Now(ctx, tx, s.clock)
		if err != nil {
			return err
		}
		p := PeriodAt(sc.Every, now)
		ok, err := claimPeriod(ctx, tx, sc.Name, p, now, s.workerID)
		if err != nil || !ok {
			return err // !ok: this period ran already
		}
		n, summary, err := sc.Action(ctx, tx, p)
		if err != nil {
			return err
		}
		claimed = true
		return finishPeriod(ctx, tx, sc.Name, p.Key, n, summary)
	})
	return claimed, err
}

// Status is a schedule as the dashboard shows it.
type Status struct {
	Name, About string
	AboutArgs   []any
	Every       Every
	LastPeriod  string
	LastRun     *time.Time
	LastJobs    int
	LastSummary string
	// LastResult is LastSummary as a catalog key and values, for the
	// dashboard; empty when the summary is no known result.
	LastResult Text
	LastWorker string
	NextRun    time.Time
}

// Status lists every schedule with its last and next run.
func (s *Scheduler) Status(ctx context.Context) ([]Status, error) {
	var out []Status
	err := s.StatusRead(ctx, &out)(s.pool)
	return out, err
}

// StatusRead is Status as one read on a system-pool Querier (for
// database.ReadAll): it stores the schedules in out.
func (s *Scheduler) StatusRead(ctx context.Context, out *[]Status) database.Read {
	return func(db database.Querier) (err error) {
		*out, err = s.status(ctx, db)
		return err
	}
}

func (s *Scheduler) status(ctx context.Context, db database.Querier) ([]Status, error) {
	names := make([]string, len(s.schedules))
	for i, sc := range s.schedules {
		names[i] = sc.Name
	}
	last, now, err := latestRuns(ctx, db, names)
	if err != nil {
		return nil, fmt.Errorf("read schedule runs: %w", err)
	}
	if t := s.clock.Now(); t != nil {
		now = *t
	}
	out := make([]Status, len(s.schedules))
	for i, sc := range s.schedules {
		p := PeriodAt(sc.Every, now)
		st := Status{Name: sc.Name, About: sc.About, AboutArgs: sc.AboutArgs, Every: sc.Every, NextRun: p.End}
		if r, ok := last[sc.Name]; ok {
			ran := r.RanAt
			st.LastPeriod, st.LastRun, st.LastJobs, st.LastSummary, st.LastWorker = r.PeriodKey, &ran, int(r.Jobs), r.Summary, r.WorkerID
			st.LastResult = ParseSummary(r.Summary)
			if r.PeriodKey != p.Key {
				st.NextRun = now // due: the leader runs it on its next pass
			}
		} else {
			st.NextRun = now
		}
		out[i] = st
	}
	return out, nil
}
