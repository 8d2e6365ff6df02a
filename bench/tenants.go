package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
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
		register(Bench{Name: "tenants burndown", Labels: fmt.Sprintf("tenants=%d", n), Run: tenantsBurndown(n, true)})
	}
	// What fairness buys and costs at the largest count, measured directly:
	// the same run with the plain priority/due-time claim.
	register(Bench{Name: "tenants burndown", Labels: "tenants=10000 fairness=off", Run: tenantsBurndown(10_000, false)})
	for _, n := range tenantCounts {
		register(Bench{Name: "tenants continuous", Labels: fmt.Sprintf("tenants=%d", n), Run: tenantsContinuous(n, true)})
	}
	register(Bench{Name: "tenants continuous", Labels: "tenants=10000 fairness=off", Run: tenantsContinuous(10_000, false)})
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
	// since, when set, returns the wait of an untagged small tenant's job
	// that starts now (burn-down: time since the engine started).
	since func(now time.Time) time.Duration
	waits []float64 // ms, small tenants' jobs only

	// Continuous: while tag is set, small tenants' jobs are inserted with
	// taggedPayload; their wait is from enqueue (available_at) to handler
	// start, and the run waits until every tagged job has started, so a
	// long wait is not left out of the figures because the window closed.
	tag          atomic.Bool
	taggedQueued atomic.Int64
	taggedDone   atomic.Int64
}

func openTenants(ctx context.Context, env *Env, n int, fair bool) (*tenantsRun, error) {
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

		DisableTenantFairness: !fair,
	})
	if err != nil {
		r.close(ctx)
		return nil, fmt.Errorf("jejak engine: %w", err)
	}
	r.eng.Register(jejakKind, func(_ context.Context, j *job.Job) error {
		if j.TenantID != r.flood {
			now := time.Now()
			tagged := bytes.Equal(j.Payload, taggedPayload)
			r.mu.Lock()
			switch {
			case tagged:
				r.waits = append(r.waits, float64(now.Sub(j.AvailableAt).Microseconds())/1000)
			case r.since != nil:
				r.waits = append(r.waits, float64(r.since(now).Microseconds())/1000)
			}
			r.mu.Unlock()
			if tagged {
				r.taggedDone.Add(1)
			}
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
	tag := r.tag.Load()
	for i := range ps {
		t, payload := r.flood, json.RawMessage(`{}`)
		if i >= flood {
			t = r.small[r.next%len(r.small)]
			r.next++
			if tag {
				payload = taggedPayload
			}
		}
		ps[i] = job.EnqueueParams{TenantID: t, Kind: jejakKind, Payload: payload}
	}
	if tag { // counted before the commit, so a waiter never misses this batch
		r.taggedQueued.Add(int64(n - flood))
	}
	return database.InTx(ctx, r.db.System, func(tx pgx.Tx) error {
		_, err := r.eng.EnqueueMany(ctx, tx, ps)
		return err
	})
}

// taggedPayload marks a small tenant's job enqueued in the measured
// window (PostgreSQL's canonical jsonb text, as a claimed job carries it).
var taggedPayload = json.RawMessage(`{"w": 1}`)

// mixed inserts n jobs with the flood's share.
func (r *tenantsRun) mixed(ctx context.Context, n int) error {
	return r.insert(ctx, n, int(floodShare*float64(n)))
}

// backlog inserts total jobs in batches: the flood's share first, then the
// small tenants' (at least one job each, so when total is too small for
// that the flood's share shrinks and the total stays, keeping throughput
// comparable across tenant counts).
func (r *tenantsRun) backlog(ctx context.Context, total, batch int) (int, error) {
	total = max(total, len(r.small)+1)
	small := max(total-int(floodShare*float64(total)), len(r.small))
	flood := total - small
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
	return total, nil
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
func tenantsBurndown(n int, fair bool) func(context.Context, *Env, string) (Result, error) {
	return func(ctx context.Context, env *Env, _ string) (Result, error) {
		cfg := env.Cfg
		r, err := openTenants(ctx, env, n, fair)
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
		r.since = func(now time.Time) time.Duration { return now.Sub(start) }
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
		finished, err := waitFinished(ctx, unfinishedJobs{r.db})
		if err != nil {
			return Result{}, err
		}
		elapsed := finished.Sub(start)
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
// clock, same machine) to its handler start, for every small tenant's job
// enqueued during the window (the run goes on until the last has started).
func tenantsContinuous(n int, fair bool) func(context.Context, *Env, string) (Result, error) {
	return func(ctx context.Context, env *Env, _ string) (Result, error) {
		cfg := env.Cfg
		r, err := openTenants(ctx, env, n, fair)
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
		if err := clock.Sleep(ctx, cfg.Warmup); err != nil {
			return Result{}, err
		}
		n0, t0 := r.cnt.n.Load(), time.Now()
		r.tag.Store(true)
		if err := clock.Sleep(ctx, cfg.Duration); err != nil {
			return Result{}, err
		}
		// The producer only tops the backlog up as jobs finish: on a busy
		// machine a short window can pass without an insert, and a window
		// with no small tenant's job measures no wait. It lasts until one
		// came (the rate is over the window's real length).
		if err := waitFirstTagged(ctx, r); err != nil {
			return Result{}, err
		}
		r.tag.Store(false)
		n1, secs := r.cnt.n.Load(), time.Since(t0).Seconds()
		// The producer keeps the flood going while the last tagged jobs
		// wait their turn.
		if err := waitTagged(ctx, r); err != nil {
			return Result{}, err
		}
		if err := stopProd(); err != nil {
			return Result{}, fmt.Errorf("producer: %w", err)
		}
		r.live = false
		if err := r.eng.Stop(ctx); err != nil {
			return Result{}, fmt.Errorf("stop: %w", err)
		}
		waits := r.waitMetrics()
		if n, _ := (Result{Metrics: waits}).Get("small_jobs"); n == 0 {
			return Result{}, fmt.Errorf("no small tenant's job was enqueued during the %s window (lengthen -duration)", cfg.Duration)
		}
		return Result{Metrics: append([]Metric{
			{"jobs_per_sec", float64(n1-n0) / secs},
			{"seconds", secs},
		}, waits...)}, nil
	}
}

// waitFirstTagged waits until a small tenant's job was enqueued in the
// window.
func waitFirstTagged(ctx context.Context, r *tenantsRun) error {
	return pollUntil(ctx, func() bool { return r.taggedQueued.Load() > 0 }, func() string {
		return "no small tenant's job was enqueued in the window"
	})
}

// waitTagged waits until every small tenant's job enqueued in the window
// has started.
func waitTagged(ctx context.Context, r *tenantsRun) error {
	return pollUntil(ctx, func() bool { return r.taggedDone.Load() >= r.taggedQueued.Load() }, func() string {
		return fmt.Sprintf("%d of %d small tenants' jobs from the window started", r.taggedDone.Load(), r.taggedQueued.Load())
	})
}

// pollUntil checks done every 5 ms until it holds; when ctx ends first, the
// error says what() was still the case.
func pollUntil(ctx context.Context, done func() bool, what func() string) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what(), ctx.Err())
		case <-t.C:
		}
	}
	return nil
}
