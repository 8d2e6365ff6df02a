package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
)

func init() { openers["jejak"] = openJejak }

const jejakKind = "bench.noop"

type jejakRun struct {
	env    *Env
	db     *JejakDB
	eng    *job.Engine
	params []job.EnqueueParams
	next   int  // round-robin tenant cursor
	live   bool // started and not yet stopped
}

// openJejak creates jejak_bench afresh (migrations, tenants) and builds an
// engine on the jejak_system pool with the same worker count, claim batch
// and poll interval River gets. Fairness stays at its default (on).
func openJejak(ctx context.Context, env *Env, h hooks) (queueRun, error) {
	db, err := env.NewJejakDB(ctx, env.DBName("jejak_bench"))
	if err != nil {
		return nil, err
	}
	r := &jejakRun{env: env, db: db}
	r.eng, err = job.New(job.Config{
		Pool:         db.System,
		Workers:      env.Cfg.Workers,
		BatchSize:    env.Cfg.ClaimBatch,
		PollInterval: env.Cfg.PollInterval,
		Logger:       env.Log,
	})
	if err != nil {
		r.Close(ctx)
		return nil, fmt.Errorf("jejak engine: %w", err)
	}
	handler := func(_ context.Context, _ *job.Job) error {
		h.done()
		return nil
	}
	if h.seq != nil {
		handler = func(_ context.Context, j *job.Job) error {
			at := time.Now()
			var p struct {
				Seq *int `json:"seq"`
			}
			if err := json.Unmarshal(j.Payload, &p); err == nil && p.Seq != nil {
				h.seq(*p.Seq, at)
			}
			h.done()
			return nil
		}
	}
	r.eng.Register(jejakKind, handler, job.KindOptions{})
	return r, nil
}

func (r *jejakRun) InsertBatch(ctx context.Context, n int) error {
	if cap(r.params) < n {
		r.params = make([]job.EnqueueParams, n)
	}
	ps := r.params[:n]
	for i := range ps {
		ps[i] = job.EnqueueParams{TenantID: r.tenant(), Kind: jejakKind, Payload: json.RawMessage(`{}`)}
	}
	return database.InTx(ctx, r.db.System, func(tx pgx.Tx) error {
		_, err := r.eng.EnqueueMany(ctx, tx, ps)
		return err
	})
}

func (r *jejakRun) EnqueueOne(ctx context.Context, seq int) error {
	p := []job.EnqueueParams{{TenantID: r.tenant(), Kind: jejakKind, Payload: json.RawMessage(`{"seq":` + strconv.Itoa(seq) + `}`)}}
	return database.InTx(ctx, r.db.System, func(tx pgx.Tx) error {
		_, err := r.eng.EnqueueMany(ctx, tx, p)
		return err
	})
}

func (r *jejakRun) tenant() int64 {
	t := r.db.Tenants[r.next%len(r.db.Tenants)]
	r.next++
	return t
}

func (r *jejakRun) Prepare(ctx context.Context) error {
	if _, err := r.db.Admin.Exec(ctx, "VACUUM ANALYZE jobs"); err != nil {
		return fmt.Errorf("vacuum jobs: %w", err)
	}
	return r.env.Checkpoint(ctx)
}

func (r *jejakRun) Start(ctx context.Context) error {
	if err := r.eng.Start(ctx); err != nil {
		return err
	}
	r.live = true
	return nil
}

func (r *jejakRun) Stop(ctx context.Context) error {
	if !r.live {
		return nil
	}
	r.live = false
	err := r.eng.Stop(ctx)
	// Where the engine's database time went: the producer claims and the
	// completer flushes serially, so their average times bound throughput.
	st := r.eng.Stats()
	fmt.Printf("# jejak engine: claims=%d small=%d jobs_per_claim=%.1f claim_ms=%.2f flushes=%d jobs_per_flush=%.1f flush_ms=%.2f\n",
		st.Claims, st.SmallClaims, float64(st.Claimed)/float64(max(st.Claims, 1)),
		float64(st.ClaimTime.Microseconds())/1000/float64(max(st.Claims, 1)),
		st.Flushes, float64(st.Completed)/float64(max(st.Flushes, 1)),
		float64(st.FlushTime.Microseconds())/1000/float64(max(st.Flushes, 1)))
	return err
}

func (r *jejakRun) Unfinished(ctx context.Context) (int64, error) {
	return countUnfinished(ctx, r.db)
}

// unfinishedJobs adapts a Jejak database to waitFinished.
type unfinishedJobs struct{ db *JejakDB }

func (u unfinishedJobs) Unfinished(ctx context.Context) (int64, error) {
	return countUnfinished(ctx, u.db)
}

// countUnfinished counts the jobs still to run from the counters the
// staff overview reads (job.Unfinished), not from the job table: "state IN
// ('pending', 'running')" scanned the whole table, finished jobs and their
// dead versions included, and polled through a burn-down of 40,000 jobs it
// kept about a quarter of one of the two cores busy beside the system it
// measures. The outcome is still read from the jobs themselves afterwards.
func countUnfinished(ctx context.Context, db *JejakDB) (int64, error) {
	return job.Unfinished(ctx, db.Admin)
}

func (r *jejakRun) Close(ctx context.Context) {
	closeRun(ctx, r.env, r.db.Name, r.Stop, r.db.Close)
}
