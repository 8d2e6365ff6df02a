package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jejakhq/jejak/internal/clock"
)

// queueRun is one system (Jejak or River) set up on a fresh database with a
// no-op handler, not yet started. The three queue benchmarks are written
// once against it so both systems do exactly the same thing.
type queueRun interface {
	// InsertBatch inserts n no-op jobs in one transaction.
	InsertBatch(ctx context.Context, n int) error
	// EnqueueOne inserts one job carrying seq in its own transaction and
	// returns once the commit is acknowledged.
	EnqueueOne(ctx context.Context, seq int) error
	// Prepare runs after setup inserts and before the clock starts
	// (VACUUM ANALYZE of the job table, then a CHECKPOINT).
	Prepare(ctx context.Context) error
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	// Unfinished counts jobs the database does not yet show as finished.
	Unfinished(ctx context.Context) (int64, error)
	// Close releases pools and drops the database.
	Close(ctx context.Context)
}

// hooks are what the no-op handlers report to the harness.
type hooks struct {
	// done is called once per handled job.
	done func()
	// seq, when set, receives the sequence number of latency jobs at
	// handler start (only the latency benchmark parses payloads).
	seq func(seq int, at time.Time)
}

// openers build a queueRun per system.
var openers = map[string]func(ctx context.Context, env *Env, h hooks) (queueRun, error){}

// counter counts handled jobs and closes reached once target is hit.
type counter struct {
	n       atomic.Int64
	target  atomic.Int64
	once    sync.Once
	reached chan struct{}
}

func newCounter() *counter { return &counter{reached: make(chan struct{})} }

func (c *counter) arm(target int64) { c.target.Store(target) }

func (c *counter) inc() {
	v := c.n.Add(1)
	if t := c.target.Load(); t > 0 && v >= t {
		c.once.Do(func() { close(c.reached) })
	}
}

// closeRun stops a system and drops its database without letting a stuck
// stop hang the whole benchmark: after a grace period the database is
// dropped WITH (FORCE), which ends the sessions a stop may be waiting on.
func closeRun(ctx context.Context, env *Env, name string, stop func(context.Context) error, closePools func()) {
	const grace = 15 * time.Second
	done := make(chan struct{})
	go func() {
		defer close(done)
		sctx, cancel := context.WithTimeout(ctx, grace)
		defer cancel()
		if err := stop(sctx); err != nil {
			env.Log.Warn("stop", "database", name, "err", err)
		}
	}()
	stuck := false
	select {
	case <-done:
	case <-time.After(grace + 5*time.Second):
		stuck = true
		env.Log.Warn("stop is stuck; dropping its database under it", "database", name)
	}
	if err := env.DropDatabase(ctx, name); err != nil {
		env.Log.Warn("drop database", "database", name, "err", err)
	}
	if stuck {
		select {
		case <-done:
		case <-time.After(grace):
			env.Log.Warn("stop still stuck after the database was dropped; leaving it", "database", name)
			return // closing the pools would wait for the stuck connections
		}
	}
	closePools()
}

func queueSystems() []string { return []string{"jejak", "river"} }

func init() {
	register(Bench{Name: "burndown", Systems: queueSystems(), Run: runBurndown})
	register(Bench{Name: "continuous", Systems: queueSystems(), Run: runContinuous})
	register(Bench{Name: "latency", Systems: queueSystems(), Run: runLatency})
}

func openQueue(ctx context.Context, env *Env, system string, h hooks) (queueRun, error) {
	open, ok := openers[system]
	if !ok {
		return nil, fmt.Errorf("no queue system %q", system)
	}
	return open(ctx, env, h)
}

func insertN(ctx context.Context, q queueRun, n, batch int) error {
	for left := n; left > 0; left -= batch {
		if err := q.InsertBatch(ctx, min(batch, left)); err != nil {
			return err
		}
	}
	return nil
}

// runBurndown pre-inserts Cfg.Jobs jobs, starts the workers and times until
// the database shows every job finished.
func runBurndown(ctx context.Context, env *Env, system string) (Result, error) {
	cfg := env.Cfg
	cnt := newCounter()
	q, err := openQueue(ctx, env, system, hooks{done: cnt.inc})
	if err != nil {
		return Result{}, err
	}
	defer q.Close(context.WithoutCancel(ctx))

	insStart := time.Now()
	if err := insertN(ctx, q, cfg.Jobs, cfg.InsertBatch); err != nil {
		return Result{}, fmt.Errorf("insert jobs: %w", err)
	}
	insRate := float64(cfg.Jobs) / time.Since(insStart).Seconds()
	if err := q.Prepare(ctx); err != nil {
		return Result{}, err
	}
	cnt.arm(int64(cfg.Jobs))

	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	start := time.Now()
	if err := q.Start(ctx); err != nil {
		return Result{}, fmt.Errorf("start: %w", err)
	}
	defer q.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // Stop again is harmless
	select {
	case <-cnt.reached:
	case <-ctx.Done():
		return Result{}, fmt.Errorf("burn-down: %d of %d jobs handled before timeout", cnt.n.Load(), cfg.Jobs)
	}
	handled := time.Since(start)
	// Handlers ran; the clock stops when the completions are committed.
	finished, err := waitFinished(ctx, q)
	if err != nil {
		return Result{}, err
	}
	elapsed := finished.Sub(start)
	if err := q.Stop(ctx); err != nil {
		return Result{}, fmt.Errorf("stop: %w", err)
	}
	return Result{Metrics: []Metric{
		{"jobs_per_sec", float64(cfg.Jobs) / elapsed.Seconds()},
		{"seconds", elapsed.Seconds()},
		{"completion_lag_ms", float64((elapsed - handled).Microseconds()) / 1000},
		{"insert_per_sec", insRate},
	}}, nil
}

// waitFinished polls until no job is pending or running; it is only called
// once every handler has run, so it waits for the last completion batch.
// It returns when the poll that saw none was sent: that poll's snapshot
// shows every job finished as of then, and the time the count itself
// takes (River's counts its job table, hundreds of milliseconds when it is
// full of dead rows; Jejak's reads its counters) is the harness's, not the
// queue's.
func waitFinished(ctx context.Context, q interface {
	Unfinished(context.Context) (int64, error)
}) (time.Time, error) {
	// The count is a query on the measured server: polled every 5 ms it
	// kept a backend busy for a good part of a core. It polls at a quarter
	// of the time the remaining jobs should take at the rate seen so far,
	// between 5 and 200 ms, so the end is still caught within a few ms.
	var lastN int64 = -1
	var lastAt time.Time
	for {
		sent := time.Now()
		n, err := q.Unfinished(ctx)
		if err != nil {
			return time.Time{}, fmt.Errorf("count what is unfinished: %w", err)
		}
		if n == 0 {
			return sent, nil
		}
		wait := 5 * time.Millisecond
		if lastN > n {
			rate := float64(lastN-n) / sent.Sub(lastAt).Seconds()
			wait = min(200*time.Millisecond, max(wait, time.Duration(float64(n)/rate/4*float64(time.Second))))
		}
		if lastN != n {
			lastN, lastAt = n, sent
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%d still unfinished: %w", n, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// runContinuous starts the workers with a producer inserting batches whenever
// the backlog falls below Cfg.Backlog, and counts jobs handled during the
// measured window after a warm-up.
func runContinuous(ctx context.Context, env *Env, system string) (Result, error) {
	cfg := env.Cfg
	cnt := newCounter()
	q, err := openQueue(ctx, env, system, hooks{done: cnt.inc})
	if err != nil {
		return Result{}, err
	}
	defer q.Close(context.WithoutCancel(ctx))
	if err := insertN(ctx, q, cfg.Backlog, cfg.InsertBatch); err != nil {
		return Result{}, fmt.Errorf("insert initial backlog: %w", err)
	}
	if err := q.Prepare(ctx); err != nil {
		return Result{}, err
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.Warmup+cfg.Duration+cfg.Timeout)
	defer cancel()
	var inserted atomic.Int64
	inserted.Store(int64(cfg.Backlog))
	prodCtx, cancelProducer := context.WithCancel(ctx)
	prodErr := make(chan error, 1)
	go func() {
		prodErr <- produce(prodCtx, q.InsertBatch, cfg.InsertBatch, cfg.Backlog, &inserted, &cnt.n)
	}()
	var (
		stopOnce sync.Once
		perr     error
	)
	stopProducer := func() error {
		stopOnce.Do(func() {
			cancelProducer()
			if perr = <-prodErr; errors.Is(perr, context.Canceled) {
				perr = nil
			}
		})
		return perr
	}
	defer stopProducer() //nolint:errcheck // reported on the normal path

	if err := q.Start(ctx); err != nil {
		return Result{}, fmt.Errorf("start: %w", err)
	}
	defer q.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // Stop again is harmless

	if err := clock.Sleep(ctx, cfg.Warmup); err != nil {
		return Result{}, err
	}
	n0, i0, t0 := cnt.n.Load(), inserted.Load(), time.Now()
	if err := clock.Sleep(ctx, cfg.Duration); err != nil {
		return Result{}, err
	}
	n1, i1, secs := cnt.n.Load(), inserted.Load(), time.Since(t0).Seconds()
	if err := stopProducer(); err != nil {
		return Result{}, fmt.Errorf("producer: %w", err)
	}
	if err := q.Stop(ctx); err != nil {
		return Result{}, fmt.Errorf("stop: %w", err)
	}
	return Result{Metrics: []Metric{
		{"jobs_per_sec", float64(n1-n0) / secs},
		{"insert_per_sec", float64(i1-i0) / secs},
		{"seconds", secs},
	}}, nil
}

// produce keeps about backlog jobs queued, inserting batch at a time.
func produce(ctx context.Context, insert func(context.Context, int) error, batch, backlog int, inserted, handled *atomic.Int64) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		for inserted.Load()-handled.Load() < int64(backlog) {
			if err := insert(ctx, batch); err != nil {
				return err
			}
			inserted.Add(int64(batch))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// runLatency enqueues LatencyJobs jobs one per transaction at LatencyRate per
// second into idle workers and measures from the acknowledged commit to the
// handler's start. A handler may start before the commit acknowledgement
// reaches the client; such samples count as 0 and are reported as early.
func runLatency(ctx context.Context, env *Env, system string) (Result, error) {
	cfg := env.Cfg
	n := cfg.LatencyJobs
	committed := make([]time.Time, n)
	started := make([]time.Time, n)
	var mu sync.Mutex
	cnt := newCounter()
	cnt.arm(int64(n))
	h := hooks{
		done: cnt.inc,
		seq: func(seq int, at time.Time) {
			if seq >= 0 && seq < n {
				mu.Lock()
				started[seq] = at
				mu.Unlock()
			}
		},
	}
	q, err := openQueue(ctx, env, system, h)
	if err != nil {
		return Result{}, err
	}
	defer q.Close(context.WithoutCancel(ctx))
	if err := q.Prepare(ctx); err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout+time.Duration(n)*time.Second/time.Duration(max(cfg.LatencyRate, 1)))
	defer cancel()
	if err := q.Start(ctx); err != nil {
		return Result{}, fmt.Errorf("start: %w", err)
	}
	defer q.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // Stop again is harmless
	// Let start-up work (leader election, first empty fetches) settle so the
	// workers are idle when the first job arrives.
	if err := clock.Sleep(ctx, 500*time.Millisecond); err != nil {
		return Result{}, err
	}
	tick := time.NewTicker(time.Second / time.Duration(max(cfg.LatencyRate, 1)))
	defer tick.Stop()
	for i := range n {
		if err := q.EnqueueOne(ctx, i); err != nil {
			return Result{}, fmt.Errorf("enqueue: %w", err)
		}
		at := time.Now()
		mu.Lock()
		committed[i] = at
		mu.Unlock()
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-tick.C:
		}
	}
	select {
	case <-cnt.reached:
	case <-ctx.Done():
		return Result{}, fmt.Errorf("latency: %d of %d jobs started before timeout", cnt.n.Load(), n)
	}
	if err := q.Stop(ctx); err != nil {
		return Result{}, fmt.Errorf("stop: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	lat := make([]float64, 0, n)
	early := 0
	for i := range n {
		if started[i].IsZero() {
			return Result{}, fmt.Errorf("latency: job %d never reported its start", i)
		}
		d := started[i].Sub(committed[i])
		if d < 0 {
			early++
			d = 0
		}
		lat = append(lat, float64(d.Microseconds())/1000)
	}
	slices.Sort(lat)
	return Result{Metrics: []Metric{
		{"p50_ms", percentile(lat, 50)},
		{"p99_ms", percentile(lat, 99)},
		{"max_ms", lat[len(lat)-1]},
		{"early", float64(early)},
		{"jobs", float64(n)},
	}}, nil
}
