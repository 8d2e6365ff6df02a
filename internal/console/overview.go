package console

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/tenant"
)

// The queue overview: live counts from the maintained counts (job_counts,
// job_dead_groups, and the jobs scheduled ahead as the maintenance leader
// last counted them) and bounded index probes (running jobs, the oldest
// due job), never a scan of the backlog; the last hour from the per-minute rollup (job_stats_minute, written by
// the engine's completion and failure statements in the transaction of the
// state change), and a cache that lets any number of viewers share one
// snapshot per few seconds instead of each poll counting the jobs table.

// Counts are the figures of one group (all, a kind, a tenant).
type Counts struct {
	Pending   int64 // includes scheduled
	Due       int64 // pending and due now
	Running   int64
	Dead      int64
	Flagged   int64 // dead and flagged for review
	Succeeded int64 // attempts over the last hour
	Failed    int64 // failed attempts over the last hour (incl. those that died)
	Died      int64 // jobs that became dead letters over the last hour
}

// FailureRate is failed / (succeeded + failed) over the last hour, 0..1.
func (c Counts) FailureRate() float64 {
	if c.Succeeded+c.Failed == 0 {
		return 0
	}
	return float64(c.Failed) / float64(c.Succeeded+c.Failed)
}

func (c *Counts) add(o Counts) {
	c.Pending += o.Pending
	c.Due += o.Due
	c.Running += o.Running
	c.Dead += o.Dead
	c.Flagged += o.Flagged
	c.Succeeded += o.Succeeded
	c.Failed += o.Failed
	c.Died += o.Died
}

// GroupCounts are the counts of one kind or one tenant.
type GroupCounts struct {
	Key      string // kind, or tenant id as text
	TenantID int64  // for tenant groups
	Counts
}

// MinuteStat is one minute of the last hour.
type MinuteStat struct {
	Minute    time.Time
	Succeeded int64
	Failed    int64
	Dead      int64
}

// Overview is one snapshot of the queues.
type Overview struct {
	// AsOf is the database time the snapshot was taken.
	AsOf   time.Time
	Totals Counts
	// ScheduledAsOf is when the maintenance leader last counted the jobs
	// scheduled ahead (nil: never): Due is Pending minus that count, so
	// a job that fell due since still counts as scheduled until the next
	// pass.
	ScheduledAsOf *time.Time
	// OldestDue is the due time of the oldest pending job already due
	// (nil when none is waiting); AsOf minus it is the queue lag.
	OldestDue *time.Time
	ByKind    []GroupCounts
	ByTenant  []GroupCounts
	// Minutes covers the last hour, oldest first, one entry per minute
	// (zero-filled), the current minute last.
	Minutes []MinuteStat
	Workers []job.WorkerInfo
	// Tenants names the tenants of ByTenant.
	Tenants tenant.Names
}

// Lag is how long the oldest due job has waited.
func (o *Overview) Lag() time.Duration {
	if o.OldestDue == nil || o.AsOf.Before(*o.OldestDue) {
		return 0
	}
	return o.AsOf.Sub(*o.OldestDue)
}

// Overview takes a snapshot of the queues across tenants: live counts from
// the maintained counts and bounded probes (see JobAdminLiveCounts), the last hour from
// the rollup, and the workers' heartbeats. One read-only transaction, a
// handful of statements; callers share snapshots through a StatsCache.
func (s *Service) Overview(ctx context.Context) (*Overview, error) {
	o := &Overview{}
	err := pgx.BeginTxFunc(ctx, s.system, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return s.overview(ctx, tx, o)
	})
	if err != nil {
		return nil, fmt.Errorf("queue overview: %w", err)
	}
	if o.Tenants, err = s.tenants.Names(ctx); err != nil {
		return nil, err
	}
	// Per-tenant figures are about customers: the system tenant's jobs
	// (staff webhook deliveries) count in the totals and per kind only.
	for _, t := range o.Tenants {
		if t.System {
			o.ByTenant = slices.DeleteFunc(o.ByTenant, func(g GroupCounts) bool { return g.TenantID == t.ID })
		}
	}
	return o, nil
}

// groups adds counts to their kind's and tenant's groups and the totals.
type groups struct {
	o       *Overview
	kinds   map[string]*Counts
	tenants map[int64]*Counts
}

func (g *groups) add(tenantID int64, kind string, c Counts) {
	k, t := g.kinds[kind], g.tenants[tenantID]
	if k == nil {
		k = &Counts{}
		g.kinds[kind] = k
	}
	if t == nil {
		t = &Counts{}
		g.tenants[tenantID] = t
	}
	k.add(c)
	t.add(c)
	g.o.Totals.add(c)
}

func (s *Service) overview(ctx context.Context, tx pgx.Tx, o *Overview) error {
	st, fst := newStore(tx), newFilteredStore(tx)
	now, err := st.now(ctx, s.clock.Now())
	if err != nil {
		return err
	}
	o.AsOf = now.UTC()
	g := &groups{o: o, kinds: map[string]*Counts{}, tenants: map[int64]*Counts{}}
	live, err := fst.liveCounts(ctx)
	if err != nil {
		return err
	}
	if o.ScheduledAsOf, err = st.scheduledAt(ctx); err != nil {
		return err
	}
	for _, r := range live {
		g.add(r.TenantID, r.Kind, Counts{Pending: r.Pending, Due: r.Due, Running: r.Running, Dead: r.Dead, Flagged: r.Flagged})
	}
	if o.OldestDue, err = st.oldestDue(ctx, o.AsOf); err != nil {
		return err
	}
	first := o.AsOf.Truncate(time.Minute).Add(-59 * time.Minute)
	totals, err := st.statsTotals(ctx, first)
	if err != nil {
		return err
	}
	for _, r := range totals {
		g.add(r.TenantID, r.Kind, r.Counts)
	}
	if o.Minutes, err = s.lastHour(ctx, st, first); err != nil {
		return err
	}
	for kind, c := range g.kinds {
		o.ByKind = append(o.ByKind, GroupCounts{Key: kind, Counts: *c})
	}
	for id, c := range g.tenants {
		o.ByTenant = append(o.ByTenant, GroupCounts{Key: fmt.Sprint(id), TenantID: id, Counts: *c})
	}
	sortGroups(o.ByKind)
	sortGroups(o.ByTenant)
	o.Workers, err = st.workers(ctx)
	return err
}

// lastHour is the 60 minutes from first, zero-filled, oldest first.
func (s *Service) lastHour(ctx context.Context, st store, first time.Time) ([]MinuteStat, error) {
	rows, err := st.statsMinutes(ctx, first)
	if err != nil {
		return nil, err
	}
	out := make([]MinuteStat, 60)
	for i := range out {
		out[i].Minute = first.Add(time.Duration(i) * time.Minute)
	}
	for _, r := range rows {
		i := int(r.Minute.Sub(first) / time.Minute)
		if i >= 0 && i < len(out) {
			out[i].Succeeded += r.Succeeded
			out[i].Failed += r.Failed
			out[i].Dead += r.Dead
		}
	}
	return out, nil
}

// sortGroups puts the busiest groups (most waiting, then most dead) first.
func sortGroups(g []GroupCounts) {
	sort.Slice(g, func(a, b int) bool {
		wa, wb := g[a].Pending+g[a].Running+g[a].Dead, g[b].Pending+g[b].Running+g[b].Dead
		if wa != wb {
			return wa > wb
		}
		ta, tb := g[a].Succeeded+g[a].Failed, g[b].Succeeded+g[b].Failed
		if ta != tb {
			return ta > tb
		}
		return g[a].Key < g[b].Key
	})
}

// DefaultStatsMaxAge is how stale a shared overview snapshot may get.
const DefaultStatsMaxAge = 3 * time.Second

// StatsCache shares overview snapshots among all viewers: a snapshot
// younger than the max age is served as is, and when it is older exactly
// one caller loads a new one while the others wait for it (single
// flight). So the database sees at most one overview query round per max
// age, whatever the number of dashboards polling.
type StatsCache struct {
	load   func(context.Context) (*Overview, error)
	maxAge time.Duration
	// now is a local monotonic clock for freshness only (how old the
	// snapshot is); the snapshot's own time comes from the database.
	now func() time.Time

	mu       sync.Mutex
	snap     *Overview
	loadedAt time.Time
	inflight chan struct{}
	lastErr  error
}

// NewStatsCache returns a cache over load. maxAge 0 means
// DefaultStatsMaxAge; a negative maxAge loads on every Get (tests).
func NewStatsCache(load func(context.Context) (*Overview, error), maxAge time.Duration) *StatsCache {
	if maxAge == 0 {
		maxAge = DefaultStatsMaxAge
	}
	return &StatsCache{load: load, maxAge: maxAge, now: time.Now}
}

// Get returns a snapshot no older than the max age and its age.
func (c *StatsCache) Get(ctx context.Context) (*Overview, time.Duration, error) {
	for {
		c.mu.Lock()
		if c.snap != nil && c.maxAge >= 0 {
			if age := c.now().Sub(c.loadedAt); age <= c.maxAge {
				snap := c.snap
				c.mu.Unlock()
				return snap, age, nil
			}
		}
		if wait := c.inflight; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, 0, ctx.Err()
			}
			c.mu.Lock()
			snap, at, err := c.snap, c.loadedAt, c.lastErr
			c.mu.Unlock()
			if err != nil {
				return nil, 0, err
			}
			if snap != nil {
				return snap, c.now().Sub(at), nil
			}
			continue
		}
		done := make(chan struct{})
		c.inflight = done
		c.mu.Unlock()

		// The load outlives a viewer who navigates away: others wait on it.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		snap, err := c.load(lctx)
		cancel()
		c.mu.Lock()
		c.inflight = nil
		c.lastErr = err
		if err == nil {
			c.snap, c.loadedAt = snap, c.now()
		}
		c.mu.Unlock()
		close(done)
		if err != nil {
			return nil, 0, err
		}
		return snap, 0, nil
	}
}
