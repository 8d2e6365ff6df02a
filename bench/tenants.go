package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
)

// Many tenants: the engine with 10, 1,000 and 10,000 tenants holding
// pending jobs, one of which floods 90% of the backlog; the other 10% is
// spread round-robin over the rest (the small tenants). Fairness is on (the
// default), so the figures show what it costs as tenants multiply
// (jobs_per_sec across tenants=) and what it buys: how long a small
// tenant's job waits behind the flood (small_wait_*_ms).

// tenantCounts are the sizes measured; the smoke test uses its own.
var tenantCounts = []int{10, 1_000, 10_000}

// floodShare is the flooding tenant's part of every insert.
const floodShare = 0.9

func init() {
	for _, n := range tenantCounts {
		register(Bench{Name: "tenants burndown", Labels: fmt.Sprintf("tenants=%d", n), Run: tenantsBurndown(n)})
	}
	for _, n := range tenantCounts {
		register(Bench{Name: "tenants continuous", Labels: fmt.Sprintf("tenants=%d", n), Run: tenantsContinuous(n)})
	}
}

// tenantsRun is a fresh database with n tenants and an engine (no-op
// handler recording when small tenants' jobs start), not yet started.
type tenantsRun struct {
	env    *Env
	db     *JejakDB
	eng    *job.Engine
	flood  int64
	small  []int64
	next   int // round-robin cursor over small
	params []job.EnqueueParams
	cnt    *counter
	live   bool // started and not yet stopped

	mu sync.Mutex
	// since returns the wait of a small tenant's job that starts now, and
	// whether it counts.
	since func(j *job.Job, now time.Time) (time.Duration, bool)
	waits []float64 // ms, small tenants' jobs only
}

func openTenants(ctx context.Context, env *Env, n int) (*tenantsRun, error) {
	if n < 2 {
		return nil, errors.New("tenants benchmark needs at least 2 tenants")
	}
	db, err := env.newJejakDB(ctx, env.DBName("jejak_bench_tenants"), n)
	if err != nil {
		return nil, err
	}
	r := &tenantsRun{env: env, db: db, flood: db.Tenants[0], small: db.Tenants[1:], cnt: newCounter()}
	r.eng, err = job.New(job.Config{
		Pool:         db.System,
		Workers:      env.Cfg.Workers,
		BatchSize:    env.Cfg.ClaimBatch,
		PollInterval: env.Cfg.PollInterval,
		Retention:    -1,
		Logger:       env.Log,
	})
	if err != nil {
		r.close(ctx)
		return nil, fmt.Errorf("jejak engine: %w", err)
	}
	r.eng.Register(jejakKind, func(_ context.Context, j *job.Job) error {
		if j.TenantID != r.flood {
			now := time.Now()
			r.mu.Lock()
			if r.since != nil {
				if d, ok := r.since(j, now); ok {
					r.waits = append(r.waits, float64(d.Microseconds())/1000)
				}
			}
			r.mu.Unlock()
		}
		r.cnt.inc()
		return nil
	}, job.KindOptions{})
	return r, nil
}

func (r *tenantsRun) close(ctx context.Context) {
	stop := func(ctx context.Context) error {
		if !r.live {
			return nil
		}
		r.live = false
		return r.eng.Stop(ctx)
	}
	closeRun(ctx, r.env, r.db.Name, stop, r.db.Close)
}

// insert enqueues n jobs in one transaction: floodShare of them for the
// flooding tenant, the rest round-robin over the small tenants, flood
// first (so without fairness the small tenants' jobs would wait for it).
func (r *tenantsRun) insert(ctx context.Context, n, flood int) error {
	if cap(r.params) < n {
		r.params = make([]job.EnqueueParams, n)
	}
	ps := r.params[:n]
	for i := range ps {
		t := r.flood
		if i >= flood {
			t = r.small[r.next%len(r.small)]
			r.next++
		}
		ps[i] = job.EnqueueParams{TenantID: t, Kind: jejakKind, Payload: json.RawMessage(`{}`)}
	}
	return database.InTx(ctx, r.db.System, func(tx pgx.Tx) error {
		_, err := r.eng.EnqueueMany(ctx, tx, ps)
		return err
	})
}

// mixed inserts n jobs with the flood's share.
func (r *tenantsRun) mixed(ctx context.Context, n int) error {
	return r.insert(ctx, n, int(floodShare*float64(n)))
}

// backlog inserts total jobs in batches: the flood's share first, then the
// small tenants' (at least one job each).
func (r *tenantsRun) backlog(ctx context.Context, total, batch int) (int, error) {
	flood := int(floodShare * float64(total))
	small := max(total-flood, len(r.small))
	for left := flood; left > 0; left -= batch {
		if err := r.insert(ctx, min(batch, left), min(batch, left)); err != nil {
			return 0, err
		}
	}
	for left := small; left > 0; left -= batch {
		if err := r.insert(ctx, min(batch, left), 0); err != nil {
			return 0, err
		}
	}
	return flood + small, nil
}

func (r *tenantsRun) prepare(ctx context.Context) error {
	if _, err := r.db.Admin.Exec(ctx, "VACUUM ANALYZE jobs"); err != nil {
		return fmt.Errorf("vacuum jobs: %w", err)
	}
	return r.env.Checkpoint(ctx)
}

func (r *tenantsRun) waitMetrics() []Metric {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := slices.Clone(r.waits)
	slices.Sort(w)
	last := 0.0
	if len(w) > 0 {
		last = w[len(w)-1]
	}
	return []Metric{
		{"small_wait_p50_ms", percentile(w, 50)},
		{"small_wait_p95_ms", percentile(w, 95)},
		{"small_wait_max_ms", last},
		{"small_jobs", float64(len(w))},
	}
}

// tenantsBurndown pre-inserts Cfg.Jobs jobs (the flood's 90% first) over
// n tenants and times until all are finished; a small tenant's wait is
// from the engine's start to its job's handler start.
func tenantsBurndown(n int) func(context.Context, *Env, string) (Result, error) {
	return func(ctx context.Context, env *Env, _ string) (Result, error) {
		cfg := env.Cfg
		r, err := openTenants(ctx, env, n)
		if err != nil {
			return Result{}, err
		}
		defer r.close(context.WithoutCancel(ctx))
		total, err := r.backlog(ctx, cfg.Jobs, cfg.InsertBatch)
		if err != nil {
			return Result{}, fmt.Errorf("insert jobs: %w", err)
		}
		if err := r.prepare(ctx); err != nil {
			return Result{}, err
		}
		r.cnt.arm(int64(total))
		ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		start := time.Now()
		r.mu.Lock()
		r.since = func(_ *job.Job, now time.Time) (time.Duration, bool) { return now.Sub(start), true }
		r.mu.Unlock()
		if err := r.eng.Start(ctx); err != nil {
			return Result{}, fmt.Errorf("start: %w", err)
		}
		r.live = true
		select {
		case <-r.cnt.reached:
		case <-ctx.Done():
			return Result{}, fmt.Errorf("tenants burn-down: %d of %d jobs handled before timeout", r.cnt.n.Load(), total)
		}
		if err := waitFinished(ctx, unfinishedJobs{r.db}); err != nil {
			return Result{}, err
		}
		elapsed := time.Since(start)
		r.live = false
		if err := r.eng.Stop(ctx); err != nil {
			return Result{}, fmt.Errorf("stop: %w", err)
		}
		return Result{Metrics: append([]Metric{
			{"jobs_per_sec", float64(total) / elapsed.Seconds()},
			{"seconds", elapsed.Seconds()},
			{"jobs", float64(total)},
		}, r.waitMetrics()...)}, nil
	}
}

// tenantsContinuous keeps about Cfg.TenantsBacklog jobs queued over n
// tenants (every insert 90% flood) and counts jobs handled in the measured
// window; a small tenant's wait is from its job's availability (database
// clock, same machine) to its handler start, for jobs enqueued in the
// window (so the initial backlog's set-up time is not counted).
func tenantsContinuous(n int) func(context.Context, *Env, string) (Result, error) {
	return func(ctx context.Context, env *Env, _ string) (Result, error) {
		cfg := env.Cfg
		r, err := openTenants(ctx, env, n)
		if err != nil {
			return Result{}, err
		}
		defer r.close(context.WithoutCancel(ctx))
		first, err := r.backlog(ctx, cfg.TenantsBacklog, cfg.InsertBatch)
		if err != nil {
			return Result{}, fmt.Errorf("insert initial backlog: %w", err)
		}
		if err := r.prepare(ctx); err != nil {
			return Result{}, err
		}
		ctx, cancel := context.WithTimeout(ctx, cfg.Warmup+cfg.Duration+cfg.Timeout)
		defer cancel()
		var inserted atomic.Int64
		inserted.Store(int64(first))
		pctx, stopProducer := context.WithCancel(ctx)
		prodErr := make(chan error, 1)
		go func() {
			prodErr <- produce(pctx, r.mixed, cfg.InsertBatch, cfg.TenantsBacklog, &inserted, &r.cnt.n)
		}()
		stopped := false
		stopProd := func() error {
			if stopped {
				return nil
			}
			stopped = true
			stopProducer()
			if err := <-prodErr; !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		}
		defer stopProd() //nolint:errcheck // reported on the normal path
		if err := r.eng.Start(ctx); err != nil {
			return Result{}, fmt.Errorf("start: %w", err)
		}
		r.live = true
		if err := sleepCtx(ctx, cfg.Warmup); err != nil {
			return Result{}, err
		}
		n0, t0 := r.cnt.n.Load(), time.Now()
		r.mu.Lock()
		r.since = func(j *job.Job, now time.Time) (time.Duration, bool) {
			return now.Sub(j.AvailableAt), !j.AvailableAt.Before(t0)
		}
		r.mu.Unlock()
		if err := sleepCtx(ctx, cfg.Duration); err != nil {
			return Result{}, err
		}
		r.mu.Lock()
		r.since = nil
		r.mu.Unlock()
		n1, secs := r.cnt.n.Load(), time.Since(t0).Seconds()
		if err := stopProd(); err != nil {
			return Result{}, fmt.Errorf("producer: %w", err)
		}
		r.live = false
		if err := r.eng.Stop(ctx); err != nil {
			return Result{}, fmt.Errorf("stop: %w", err)
		}
		return Result{Metrics: append([]Metric{
			{"jobs_per_sec", float64(n1-n0) / secs},
			{"seconds", secs},
		}, r.waitMetrics()...)}, nil
	}
}

// unfinishedJobs adapts a Jejak database to waitFinished.
type unfinishedJobs struct{ db *JejakDB }

func (u unfinishedJobs) Unfinished(ctx context.Context) (int64, error) {
	var n int64
	err := u.db.Admin.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE state IN ('pending', 'running')").Scan(&n)
	return n, err
}
