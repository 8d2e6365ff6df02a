package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// asleep reports whether the producer of worker is marked asleep in
// wake_listeners (no row: it never slept, or stopped).
func asleep(t *testing.T, db *testdb.DB, worker string) bool {
	t.Helper()
	var a bool
	err := db.Admin.QueryRow(context.Background(),
		"SELECT asleep FROM wake_listeners WHERE channel = 'jejak_jobs' AND listener = $1", worker).Scan(&a)
	if errors.Is(err, pgx.ErrNoRows) {
		return false
	}
	if err != nil {
		t.Fatalf("read wake_listeners: %v", err)
	}
	return a
}

// blocker registers "block" (runs until release is closed, reporting its
// start on started) and "ping" (reports the engine's name on ran) on e.
func blocker(e *job.Engine, name string, release <-chan struct{}, started chan<- int64, ran chan<- string) {
	e.Register("block", func(ctx context.Context, j *job.Job) error {
		started <- j.ID
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, job.KindOptions{})
	e.Register("ping", func(ctx context.Context, j *job.Job) error { ran <- name; return nil }, job.KindOptions{})
}

// saturate enqueues 2×workers blocking jobs on e, one transaction each,
// and waits until the engine is saturated (awaitSaturated).
func saturate(t *testing.T, db *testdb.DB, e *job.Engine, tenant int64, worker string, workers int, started <-chan int64) {
	t.Helper()
	for range 2 * workers {
		enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "block", Payload: json.RawMessage(`{}`)})
	}
	awaitSaturated(t, db, worker, workers, started)
}

// awaitSaturated waits until 2×workers blocking jobs are all claimed
// (running or claimed ahead) and the producer, waiting for a free slot,
// is marked awake.
func awaitSaturated(t *testing.T, db *testdb.DB, worker string, workers int, started <-chan int64) {
	t.Helper()
	for range workers {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("blocking jobs did not start")
		}
	}
	testwait.Within(t, 10*time.Second, "every worker slot taken and the producer awake", func() bool {
		return countState(t, db, job.StateRunning) == 2*workers && !asleep(t, db, worker)
	})
}

// blockingEngine starts an engine of workers workers named worker with the
// kinds of blocker; its blocking jobs are released as t ends, before the
// engine stops. asleepAtOnce skips the warm period after work, so the
// producer marks itself asleep as soon as nothing is due.
func blockingEngine(t *testing.T, db *testdb.DB, worker string, workers int, asleepAtOnce bool) (*job.Engine, <-chan int64) {
	t.Helper()
	e := newEngine(t, db, job.Config{Workers: workers, WorkerID: worker, PollInterval: time.Hour})
	if asleepAtOnce {
		e.SetWarm(-1, 0)
	}
	release := make(chan struct{})
	started, ran := make(chan int64, 4*workers), make(chan string, 64)
	blocker(e, worker, release, started, ran)
	startEngine(t, e)
	t.Cleanup(func() { close(release) }) // before Stop (cleanups run last first)
	return e, started
}

// TestBusyEngineInsertsDoNotNotify: while every worker is busy, concurrent
// enqueuing transactions send no NOTIFY, so their commits do not take the
// NOTIFY lock (PreCommit_Notify locks only when notifications are pending)
// and do not wait on one another.
func TestBusyEngineInsertsDoNotNotify(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenants(t, db, 1)[0]
	const workers = 2
	e, started := blockingEngine(t, db, "busy", workers, false)
	saturate(t, db, e, tenant, "busy", workers, started)

	l := db.Listen(t, "jejak_jobs")
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			errs <- database.InTenantTx(context.Background(), db.App, tenant, func(tx pgx.Tx) error {
				_, err := e.Enqueue(context.Background(), tx, job.EnqueueParams{TenantID: tenant, Kind: "ping", Payload: json.RawMessage(`{}`)})
				return err
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
	}
	if got := l.Count(t); got != 0 {
		t.Fatalf("%d NOTIFYs for %d enqueues while every worker was busy, want none", got, n)
	}
	if p := countState(t, db, job.StatePending); p != n {
		t.Fatalf("%d pending jobs, want %d", p, n)
	}
}

// TestSaturatingClaimMarksTheLoopAwake: a claim that fills every slot
// (here one wake-up's claim of a whole backlog into an asleep engine)
// leaves the producer waiting for a free slot, and marked awake, so the
// inserts that follow send no NOTIFY. Marked asleep, every insert would
// notify an engine that cannot take its job.
func TestSaturatingClaimMarksTheLoopAwake(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenants(t, db, 1)[0]
	const workers = 2
	e, started := blockingEngine(t, db, "full", workers, true)
	testwait.For(t, "the idle producer marked asleep", func() bool { return asleep(t, db, "full") })
	enqueueBulk(t, db, e, tenant, "block", 2*workers) // one transaction: one wake-up
	awaitSaturated(t, db, "full", workers, started)
}

// TestIdleEngineIsWokenByInsert: an engine marked asleep is woken by the
// insert's NOTIFY (its poll is an hour), also while another replica on the
// same database is busy and marked awake.
func TestIdleEngineIsWokenByInsert(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenants(t, db, 1)[0]
	release := make(chan struct{})
	started, ran := make(chan int64, 8), make(chan string, 8)
	busy := newEngine(t, db, job.Config{Workers: 1, WorkerID: "busy", PollInterval: time.Hour})
	blocker(busy, "busy", release, started, ran)
	startEngine(t, busy)
	t.Cleanup(func() { close(release) })
	saturate(t, db, busy, tenant, "busy", 1, started)

	pool2, err := database.OpenSystem(context.Background(), db.URL, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool2.Close)
	idle := newEngine(t, db, job.Config{Workers: 1, WorkerID: "idle", PollInterval: time.Hour, Pool: pool2})
	blocker(idle, "idle", release, started, ran)
	startEngine(t, idle)
	for round := range 3 {
		testwait.Within(t, 10*time.Second, "the idle engine marked asleep", func() bool { return asleep(t, db, "idle") })
		if asleep(t, db, "busy") {
			t.Fatal("the busy engine is marked asleep")
		}
		enqueueTenant(t, db, idle, job.EnqueueParams{TenantID: tenant, Kind: "ping", Payload: json.RawMessage(`{}`)})
		select {
		case who := <-ran:
			if who != "idle" {
				t.Fatalf("round %d: ping ran on %s, want the idle engine", round, who)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: job not started within 10 s (poll interval 1 h): the insert did not wake the idle engine", round)
		}
	}
}

// TestJobInsertedAsProducerFallsAsleepIsClaimed: a job whose insert saw
// the producer awake (so sent no NOTIFY) but committed only after the
// producer had marked itself asleep and made its last claim is still
// claimed at once, not after the poll interval: the producer waits for
// such transactions (the wake lock they hold) before it sleeps.
func TestJobInsertedAsProducerFallsAsleepIsClaimed(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{Workers: 1, WorkerID: "racer", PollInterval: time.Hour})
	release := make(chan struct{})
	started, ran := make(chan int64, 4), make(chan string, 4)
	blocker(e, "racer", release, started, ran)
	startEngine(t, e)
	saturate(t, db, e, tenant, "racer", 1, started)
	l := db.Listen(t, "jejak_jobs")

	// The insert runs while the producer is awake: no NOTIFY is queued.
	tx, err := db.App.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := database.ScopeTx(ctx, tx, tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Enqueue(ctx, tx, job.EnqueueParams{TenantID: tenant, Kind: "ping", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// The blocking jobs end; the producer finds nothing due (the ping is
	// not committed), stays warm a while and marks itself asleep.
	close(release)
	testwait.Within(t, 10*time.Second, "the producer marked asleep", func() bool { return asleep(t, db, "racer") })
	// Marked asleep, the producer has made (or is making) what would be
	// its last claim. It must not sleep while the insert is open: it keeps
	// waiting for it and claiming. (Sleeping here, it would leave the job
	// to the hourly poll.)
	c0 := e.Stats().Claims
	testwait.Within(t, 10*time.Second, "claims while the insert is open", func() bool { return e.Stats().Claims >= c0+2 })
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("job committed after the producer fell asleep not started within 10 s (poll interval 1 h)")
	}
	if got := l.Count(t); got != 0 {
		t.Fatalf("%d NOTIFYs: the test meant the insert to see the producer awake", got)
	}
}

// TestStaleSleeperOnlyCostsNotifies: a producer that died while marked
// asleep leaves its row; inserts notify on its account (harmless) until
// the row expires and the maintenance leader deletes it.
func TestStaleSleeperOnlyCostsNotifies(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{Workers: 0})
	if _, err := db.Admin.Exec(ctx, `INSERT INTO wake_listeners (channel, listener, asleep, expires_at)
		VALUES ('jejak_jobs', 'gone', true, now() - interval '1 second')`); err != nil {
		t.Fatal(err)
	}
	l := db.Listen(t, "jejak_jobs")
	enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "ping", Payload: json.RawMessage(`{}`)})
	if got := l.Count(t); got != 1 {
		t.Fatalf("%d NOTIFYs with a (stale) sleeper, want 1", got)
	}
	n, err := database.PruneSleepers(ctx, db.System)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d rows (%v), want the stale one", n, err)
	}
	for i := range 3 {
		enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "ping", Payload: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)})
	}
	if got := l.Count(t); got != 0 {
		t.Fatalf("%d NOTIFYs with nobody asleep, want none", got)
	}
}
