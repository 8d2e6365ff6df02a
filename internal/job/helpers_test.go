package job_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newTenants inserts n tenants through the superuser pool and returns ids.
func newTenants(t *testing.T, db *testdb.DB, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		err := db.Admin.QueryRow(context.Background(),
			"INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id", fmt.Sprintf("tenant-%d", i+1)).Scan(&ids[i])
		if err != nil {
			t.Fatalf("insert tenant: %v", err)
		}
	}
	return ids
}

func newEngine(t *testing.T, db *testdb.DB, cfg job.Config) *job.Engine {
	t.Helper()
	if cfg.Pool == nil {
		cfg.Pool = db.System
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	e, err := job.New(cfg)
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	return e
}

// poolOfOne is a pool of the system role with a single connection. The
// caller closes it: closing waits for the connection to be given back.
func poolOfOne(t *testing.T, db *testdb.DB) *pgxpool.Pool {
	t.Helper()
	cfg := db.System.Config().Copy()
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// enqueueTenant enqueues through the tenant-scoped jejak_app pool, as
// application code does.
func enqueueTenant(t *testing.T, db *testdb.DB, e *job.Engine, p job.EnqueueParams) job.Enqueued {
	t.Helper()
	var out job.Enqueued
	err := database.InTenantTx(context.Background(), db.App, p.TenantID, func(tx pgx.Tx) error {
		var err error
		out, err = e.Enqueue(context.Background(), tx, p)
		return err
	})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return out
}

// enqueueBulk inserts n no-op jobs for a tenant through the system pool.
func enqueueBulk(t *testing.T, db *testdb.DB, e *job.Engine, tenantID int64, kind string, n int) []int64 {
	t.Helper()
	ps := make([]job.EnqueueParams, n)
	for i := range ps {
		ps[i] = job.EnqueueParams{TenantID: tenantID, Kind: kind, Payload: json.RawMessage(`{"n":` + fmt.Sprint(i) + `}`)}
	}
	var ids []int64
	err := database.InTx(context.Background(), db.System, func(tx pgx.Tx) error {
		var err error
		ids, err = e.EnqueueMany(context.Background(), tx, ps)
		return err
	})
	if err != nil {
		t.Fatalf("enqueue many: %v", err)
	}
	return ids
}

func countState(t *testing.T, db *testdb.DB, state job.State) int {
	t.Helper()
	var n int
	if err := db.Admin.QueryRow(context.Background(), "SELECT count(*) FROM jobs WHERE state = $1", string(state)).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", state, err)
	}
	return n
}

// waitIdle waits until e's producer is idle (Engine.Idle): a test that
// counts claims per wake-up sends the next one only then, so none arrives
// while the loop is still finishing a claim (which the loop rightly takes
// for a stream of jobs), however slowly a loaded machine schedules it.
func waitIdle(t *testing.T, e *job.Engine) {
	t.Helper()
	testwait.Within(t, 30*time.Second, "the claim loop waiting for a wake-up", e.Idle)
}

func fixedBackoff(attempt int) time.Duration { return time.Duration(1<<attempt) * time.Minute }

// claimPerTenant claims a batch of n, fails unless it holds want jobs, and
// counts them per tenant.
func claimPerTenant(t *testing.T, e *job.Engine, n, want int) map[int64]int {
	t.Helper()
	jobs, err := e.Claim(context.Background(), "w", n)
	if err != nil || len(jobs) != want {
		t.Fatalf("claim of %d = %d jobs, %v; want %d", n, len(jobs), err, want)
	}
	per := map[int64]int{}
	for _, j := range jobs {
		per[j.TenantID]++
	}
	return per
}
