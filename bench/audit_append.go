package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
)

// Audit append: one tenant, appendWriters concurrent transactions, each
// inserting one project row and (in the audited variant) recording one
// audit event, with the sealer running beside them as in production. The
// same transactions without the event, in turns with them in the same
// round, are the ceiling.
// Also printed: how long events waited to be sealed (p50/p99).

// appendWriters is the default of Config.AppendWriters.
const appendWriters = 64

func init() {
	register(Bench{Name: "audit_append", Run: auditAppend})
}

func auditAppend(ctx context.Context, env *Env, _ string) (Result, error) {
	name := env.DBName("jejak_bench_audit_append")
	db, err := env.NewJejakDB(ctx, name)
	if err != nil {
		return Result{}, err
	}
	defer env.DropDatabase(context.WithoutCancel(ctx), name) //nolint:errcheck
	defer db.Close()
	writers := env.Cfg.AppendWriters
	if writers <= 0 {
		writers = appendWriters
	}
	pool, err := database.OpenSystem(ctx, db.URL, int32(writers+4))
	if err != nil {
		return Result{}, err
	}
	defer pool.Close()
	tenant := db.Tenants[0]
	window := env.Cfg.Duration
	if window <= 0 {
		window = 5 * time.Second
	}

	signer, err := audit.GenerateLogSigner()
	if err != nil {
		return Result{}, err
	}
	var mu sync.Mutex
	var delays []time.Duration
	sealer := audit.NewSealer(db.System, audit.SealerOptions{Signer: signer, OnSealed: func(d []time.Duration) {
		mu.Lock()
		delays = append(delays, d...)
		mu.Unlock()
	}})
	rec := audit.NewRecorder(clock.Database{})
	// An unmeasured lead-in, then the statistics autovacuum would have
	// taken by now (this machine's server runs with it off): measured is
	// the steady state, not the first seconds of a fresh database, whose
	// plans rest on the template's "a few events per tenant".
	if _, err := sealing(ctx, sealer, func() (float64, error) {
		return appendFor(ctx, pool, writers, tenant, env.Cfg.Warmup, rec)
	}); err != nil {
		return Result{}, err
	}
	if err := analyze(ctx, env, name, "audit_sealed", "audit_unsealed", "audit_leaves"); err != nil {
		return Result{}, err
	}
	mu.Lock()
	delays = delays[:0]
	mu.Unlock()
	// The ceiling and the audited writes take turns, a slice of the window
	// each, so both see the same machine, warm sessions and the same table
	// sizes. Measured first, on the fresh database, the ceiling also paid
	// for opening the pool's sessions (17-24 ms of CPU each here) and
	// moved between rounds by more than the audit's cost did.
	var ceiling, audited float64
	for range appendTurns {
		c, err := appendFor(ctx, pool, writers, tenant, window/appendTurns, nil)
		if err != nil {
			return Result{}, err
		}
		a, err := sealing(ctx, sealer, func() (float64, error) {
			return appendFor(ctx, pool, writers, tenant, window/appendTurns, rec)
		})
		if err != nil {
			return Result{}, err
		}
		ceiling += c / appendTurns
		audited += a / appendTurns
	}
	return Result{Metrics: []Metric{
		{"events_per_sec", audited},
		{"ceiling_per_sec", ceiling},
		{"of_ceiling", audited / ceiling},
		{"seal_p50_ms", pctMs(delays, 0.50)},
		{"seal_p99_ms", pctMs(delays, 0.99)},
	}}, nil
}

// appendTurns is how many slices of the window each variant gets.
const appendTurns = 4

// sealing runs write with the sealer sealing as in production, then seals
// what is left, so that the next turn starts with nothing unsealed.
func sealing(ctx context.Context, sealer *audit.Sealer, write func() (float64, error)) (float64, error) {
	sctx, stop := context.WithCancel(ctx)
	sealed := make(chan struct{})
	go func() { sealer.Run(sctx, 100*time.Millisecond); close(sealed) }()
	n, err := write()
	stop()
	<-sealed
	if err != nil {
		return 0, err
	}
	return n, sealer.Drain(ctx)
}

// appendFor runs writers concurrent writers for window and returns
// committed transactions per second; rec nil leaves the audit event out.
func appendFor(ctx context.Context, pool *pgxpool.Pool, writers int, tenant int64, window time.Duration, rec *audit.Recorder) (float64, error) {
	var done atomic.Int64
	var firstErr atomic.Value
	deadline := time.Now().Add(window)
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				err := database.InTx(ctx, pool, func(tx pgx.Tx) error {
					var id int64
					if err := tx.QueryRow(ctx, `INSERT INTO projects (tenant_id, name) VALUES ($1, $2) RETURNING id`,
						tenant, fmt.Sprintf("p-%d-%d", w, i)).Scan(&id); err != nil {
						return err
					}
					if rec == nil {
						return nil
					}
					return rec.Append(ctx, tx, audit.Event{TenantID: tenant, ActorKind: audit.ActorSystem,
						Action: "project.create", Entity: "project", EntityID: fmt.Sprint(id)})
				})
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return 0, err
	}
	return float64(done.Load()) / window.Seconds(), nil
}

// analyze runs ANALYZE on tables of database name (all of them when none
// is named) as its owner.
func analyze(ctx context.Context, env *Env, name string, tables ...string) error {
	return asOwner(ctx, env, name, "ANALYZE "+strings.Join(tables, ", "))
}

// vacuum runs VACUUM on tables of database name as its owner.
func vacuum(ctx context.Context, env *Env, name string, tables ...string) error {
	return asOwner(ctx, env, name, "VACUUM "+strings.Join(tables, ", "))
}

// asOwner runs one maintenance statement on database name as its owner.
func asOwner(ctx context.Context, env *Env, name, stmt string) error {
	admin, err := env.Admin(ctx, name)
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("%s on %s: %w", stmt, name, err)
	}
	return nil
}
