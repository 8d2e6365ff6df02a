package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
)

// The engine load runs on its own queue and kind, so it never claims the
// jobs a database was seeded with (they would change the pages' job mix)
// and its rows can be removed afterwards.
const (
	loadQueue = "bench-load"
	loadKind  = "bench.load"
)

// engineLoad is what an operator's database looks like while Jejak works:
// a worker pool from internal/job (Cfg.Workers no-op handlers, Cfg.Conns
// connections of its own) and a producer keeping about Cfg.Backlog jobs
// queued in batches of Cfg.InsertBatch, as in the continuous benchmark.
type engineLoad struct {
	name     string
	pool     *pgxpool.Pool
	eng      *job.Engine
	handled  atomic.Int64
	inserted atomic.Int64
	cancel   context.CancelFunc
	prodErr  chan error
	h0       int64     // handled when the warm-up ended
	started  time.Time // when the warm-up ended
}

// startLoad starts the load on database name (migrated, with tenants) and
// returns once it has run for Cfg.Warmup, so the caller measures a busy
// database rather than a starting one.
func startLoad(ctx context.Context, env *Env, name string, tenants []int64) (*engineLoad, error) {
	cfg := env.Cfg
	l := &engineLoad{name: name, prodErr: make(chan error, 1)}
	var err error
	if l.pool, err = database.OpenSystem(ctx, env.DatabaseURL(name), cfg.Conns); err != nil {
		return nil, err
	}
	l.eng, err = job.New(job.Config{
		Pool:         l.pool,
		Workers:      cfg.Workers,
		BatchSize:    cfg.ClaimBatch,
		PollInterval: cfg.PollInterval,
		Queues:       []string{loadQueue},
		Retention:    -1, // never prune the seeded jobs under the pages
		Logger:       env.Log,
	})
	if err != nil {
		l.pool.Close()
		return nil, fmt.Errorf("load engine: %w", err)
	}
	l.eng.Register(loadKind, func(context.Context, *job.Job) error {
		l.handled.Add(1)
		return nil
	}, job.KindOptions{})

	params := make([]job.EnqueueParams, cfg.InsertBatch)
	next := 0
	insert := func(ctx context.Context, n int) error {
		ps := params[:n]
		for i := range ps {
			ps[i] = job.EnqueueParams{TenantID: tenants[next%len(tenants)], Kind: loadKind, Queue: loadQueue, Payload: json.RawMessage(`{}`)}
			next++
		}
		return database.InTx(ctx, l.pool, func(tx pgx.Tx) error {
			_, err := l.eng.EnqueueMany(ctx, tx, ps)
			return err
		})
	}
	var pctx context.Context
	pctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		l.prodErr <- produce(pctx, insert, cfg.InsertBatch, cfg.Backlog, &l.inserted, &l.handled)
	}()
	if err := l.eng.Start(pctx); err != nil {
		l.cancel()
		<-l.prodErr
		l.pool.Close()
		return nil, fmt.Errorf("start load engine: %w", err)
	}
	// The warm-up counts from the first job handled: on a large, freshly
	// analyzed table the engine's first claims can take longer than the
	// warm-up, and the page would then be timed with no load at all.
	for deadline := time.Now().Add(time.Minute); l.handled.Load() == 0; {
		if time.Now().After(deadline) {
			_, _ = l.stop(context.WithoutCancel(ctx), env)
			return nil, errors.New("load engine handled no job within a minute")
		}
		if err := clock.Sleep(ctx, 10*time.Millisecond); err != nil {
			_, _ = l.stop(context.WithoutCancel(ctx), env)
			return nil, err
		}
	}
	if err := clock.Sleep(ctx, cfg.Warmup); err != nil {
		_, _ = l.stop(context.WithoutCancel(ctx), env)
		return nil, err
	}
	l.h0, l.started = l.handled.Load(), time.Now()
	return l, nil
}

// awaitWork waits (at most a minute) until the load has handled a job
// since its warm-up ended, so a page timed in a short window (the smoke
// run's few requests, on a busy machine) was timed under load, and the
// rate stop reports is not a zero from a window no claim fell into.
func (l *engineLoad) awaitWork(ctx context.Context) error {
	for deadline := time.Now().Add(time.Minute); l.handled.Load() == l.h0; {
		if time.Now().After(deadline) {
			return errors.New("load engine handled no job while the page was timed")
		}
		if err := clock.Sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// stop ends the load, removes its jobs (and their rollup rows) and
// vacuums, so the database is as before, and returns the jobs/s it handled
// after warm-up.
func (l *engineLoad) stop(ctx context.Context, env *Env) (float64, error) {
	secs := time.Since(l.started).Seconds()
	handled := l.handled.Load() - l.h0
	l.cancel()
	perr := <-l.prodErr
	if errors.Is(perr, context.Canceled) {
		perr = nil
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	serr := l.eng.Stop(sctx)
	l.pool.Close()
	admin, err := env.Admin(ctx, l.name)
	if err != nil {
		return 0, err
	}
	defer admin.Close()
	// Side tables filled by triggers on jobs (the trace index) go first,
	// while the jobs still say which rows are the load's.
	if _, err := admin.Exec(ctx, `DELETE FROM job_traces t USING jobs j WHERE j.queue = $1 AND t.job_id = j.id`, loadQueue); err != nil {
		return 0, fmt.Errorf("remove load trace index rows: %w", err)
	}
	if _, err := admin.Exec(ctx, `DELETE FROM jobs WHERE queue = $1`, loadQueue); err != nil {
		return 0, fmt.Errorf("remove load jobs: %w", err)
	}
	if _, err := admin.Exec(ctx, `DELETE FROM job_stats_minute WHERE kind = $1`, loadKind); err != nil {
		return 0, fmt.Errorf("remove load rollup: %w", err)
	}
	// The next quiet measurement starts from a vacuumed table, not from
	// the load's dead rows.
	if _, err := admin.Exec(ctx, `VACUUM (ANALYZE) jobs`); err != nil {
		return 0, fmt.Errorf("vacuum after load: %w", err)
	}
	if err := errors.Join(perr, serr); err != nil {
		return 0, fmt.Errorf("engine load: %w", err)
	}
	if l.started.IsZero() || secs <= 0 {
		return 0, nil
	}
	return float64(handled) / secs, nil
}
