package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

func init() { openers["river"] = openRiver }

// riverArgs is the no-op job. Seq is only set on latency jobs, so the
// throughput jobs carry the same "{}" payload as Jejak's.
type riverArgs struct {
	Seq *int `json:"seq,omitempty"`
}

func (riverArgs) Kind() string { return "bench.noop" }

type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	h hooks
}

func (w *riverWorker) Work(_ context.Context, j *river.Job[riverArgs]) error {
	if w.h.seq != nil && j.Args.Seq != nil {
		w.h.seq(*j.Args.Seq, time.Now())
	}
	w.h.done()
	return nil
}

type riverRun struct {
	env    *Env
	name   string
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	batch  []river.InsertManyParams
	live   bool // started and not yet stopped
}

// openRiver creates river_bench afresh, migrates it with rivermigrate and
// builds a client configured like River's own `river bench`: one client,
// Workers workers on the default queue, the same fetch cooldown and poll
// interval Jejak gets.
func openRiver(ctx context.Context, env *Env, h hooks) (queueRun, error) {
	name := env.DBName("river_bench")
	if err := env.FreshDatabase(ctx, name); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(env.DatabaseURL(name))
	if err != nil {
		return nil, fmt.Errorf("parse river url: %w", err)
	}
	pcfg.MaxConns = env.Cfg.Conns
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("open river pool: %w", err)
	}
	r := &riverRun{env: env, name: name, pool: pool}
	driver := riverpgxv5.New(pool)
	mig, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: env.Log})
	if err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{h: h})
	r.client, err = river.NewClient(driver, &river.Config{
		FetchCooldown:     env.Cfg.FetchCooldown,
		FetchPollInterval: env.Cfg.PollInterval,
		Logger:            env.Log,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: env.Cfg.Workers}},
		Workers:           workers,
	})
	if err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("river client: %w", err)
	}
	return r, nil
}

func (r *riverRun) InsertBatch(ctx context.Context, n int) error {
	if cap(r.batch) < n {
		r.batch = make([]river.InsertManyParams, n)
		for i := range r.batch {
			r.batch[i].Args = riverArgs{}
		}
	}
	_, err := r.client.InsertMany(ctx, r.batch[:n])
	return err
}

func (r *riverRun) EnqueueOne(ctx context.Context, seq int) error {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	if _, err := r.client.InsertTx(ctx, tx, riverArgs{Seq: &seq}, nil); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (r *riverRun) Prepare(ctx context.Context) error {
	if _, err := r.pool.Exec(ctx, "VACUUM ANALYZE river_job"); err != nil {
		return fmt.Errorf("vacuum river_job: %w", err)
	}
	return r.env.Checkpoint(ctx)
}

func (r *riverRun) Start(ctx context.Context) error {
	if err := r.client.Start(ctx); err != nil {
		return err
	}
	r.live = true
	return nil
}

func (r *riverRun) Stop(ctx context.Context) error {
	if !r.live {
		return nil
	}
	r.live = false
	return r.client.Stop(ctx)
}

func (r *riverRun) Unfinished(ctx context.Context) (int64, error) {
	var n int64
	err := r.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state NOT IN ('completed', 'cancelled', 'discarded')").Scan(&n)
	return n, err
}

func (r *riverRun) Close(ctx context.Context) {
	closeRun(ctx, r.env, r.name, r.Stop, r.pool.Close)
}
