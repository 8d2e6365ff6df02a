package job_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// TestHeartbeatRenewsWithPoolSaturated: while every connection of the
// engine's pool is held elsewhere (claims, completions, the relay and staff
// pages can do that under load), the heartbeat still renews a running
// job's lease, so the job is neither cancelled locally nor rescued.
func TestHeartbeatRenewsWithPoolSaturated(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenants(t, db, 1)[0]
	pool, err := database.OpenSystem(ctx, db.URL, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// Sixty heartbeats long: a loaded machine has stalled a renewal past a
	// 2 s lease, and this test is about the saturated pool, not about how
	// fast PostgreSQL answers.
	const lease = 6 * time.Second
	e := newEngine(t, db, job.Config{Pool: pool, Workers: 1, LeaseDuration: lease, HeartbeatInterval: 100 * time.Millisecond})
	started, done := make(chan struct{}), make(chan struct{})
	cause := make(chan error, 1)
	e.Register("hold", func(ctx context.Context, j *job.Job) error {
		close(started)
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			cause <- context.Cause(ctx)
			return ctx.Err()
		}
	}, job.KindOptions{})
	id := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "hold", Payload: json.RawMessage(`{}`)}).ID
	startEngine(t, e)
	<-started
	defer close(done)

	// Take every connection the pool can give, and keep taking any the
	// engine lets go (its listener and maintenance leader hold theirs), so
	// the pool stays full; released before the engine stops.
	soakCtx, stopSoak := context.WithCancel(ctx)
	soaked := make(chan []*pgxpool.Conn)
	go func() {
		var held []*pgxpool.Conn
		for {
			c, err := pool.Acquire(soakCtx)
			if err != nil {
				soaked <- held
				return
			}
			held = append(held, c)
		}
	}()
	defer func() {
		stopSoak()
		for _, c := range <-soaked {
			c.Release()
		}
	}()
	testwait.Within(t, 10*time.Second, "the pool saturated", func() bool {
		return pool.Stat().AcquiredConns() == pool.Stat().MaxConns()
	})
	var first time.Time
	if err := db.Admin.QueryRow(ctx, `SELECT lease_expires_at FROM jobs WHERE id = $1`, id).Scan(&first); err != nil {
		t.Fatal(err)
	}
	// Renewed past the lease it had when the pool filled up: the
	// heartbeat kept speaking for longer than a whole lease.
	testwait.Within(t, 5*lease, "lease renewed while the pool is saturated", func() bool {
		var exp *time.Time
		if err := db.Admin.QueryRow(ctx, `SELECT lease_expires_at FROM jobs WHERE id = $1`, id).Scan(&exp); err != nil {
			t.Fatal(err)
		}
		if exp == nil {
			t.Fatal("the job's lease ran out and it was rescued while its worker was alive")
		}
		return exp.After(first.Add(lease))
	})
	select {
	case err := <-cause:
		t.Fatalf("handler cancelled while its worker was alive: %v", err)
	default:
	}
	if st := pool.Stat(); st.AcquiredConns() < st.MaxConns() || st.IdleConns() > 0 {
		t.Fatalf("the pool was not saturated throughout: %d of %d acquired", st.AcquiredConns(), st.MaxConns())
	}
	other := newEngine(t, db, job.Config{})
	if n, err := other.RescueExpired(ctx); err != nil || n != 0 {
		t.Fatalf("rescue = %d, %v; want none rescued", n, err)
	}
	var state string
	var attempt int
	if err := db.Admin.QueryRow(ctx, `SELECT state, attempt FROM jobs WHERE id = $1`, id).Scan(&state, &attempt); err != nil {
		t.Fatal(err)
	}
	if state != string(job.StateRunning) || attempt != 1 {
		t.Fatalf("job %s attempt %d, want running attempt 1", state, attempt)
	}
}
