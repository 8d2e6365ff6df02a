package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

func startEngine(t *testing.T, e *job.Engine) {
	t.Helper()
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.Stop(ctx)
	})
}

// TestPoolCompletesEveryJobExactlyOnce: 8 workers burn down 10,000 jobs of
// four tenants; every job runs exactly once and ends succeeded.
func TestPoolCompletesEveryJobExactlyOnce(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ten := newTenants(t, db, 4)
	e := newEngine(t, db, job.Config{Workers: 8, BatchSize: 50})
	const perTenant = 2500
	var runs sync.Map
	var dup, total atomic.Int64
	e.Register("noop", func(ctx context.Context, j *job.Job) error {
		if _, loaded := runs.LoadOrStore(j.ID, true); loaded {
			dup.Add(1)
		}
		total.Add(1)
		return nil
	}, job.KindOptions{})
	for _, id := range ten {
		enqueueBulk(t, db, e, id, "noop", perTenant)
	}
	startEngine(t, e)
	testwait.Within(t, 60*time.Second, "all jobs succeeded", func() bool { return countState(t, db, job.StateSucceeded) == 4*perTenant })
	if dup.Load() != 0 || total.Load() != 4*perTenant {
		t.Fatalf("runs = %d, duplicates = %d", total.Load(), dup.Load())
	}
	if n := countState(t, db, job.StateRunning) + countState(t, db, job.StatePending); n != 0 {
		t.Fatalf("%d jobs left unfinished", n)
	}
}

// TestTwoEnginesNeverRunTheSameJob: two engines with their own pools on one
// database share the work without ever running a job twice.
func TestTwoEnginesNeverRunTheSameJob(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ten := newTenants(t, db, 2)
	pool2, err := database.OpenSystem(context.Background(), db.URL, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool2.Close)
	var runs sync.Map
	var dup atomic.Int64
	perEngine := [2]atomic.Int64{}
	engines := make([]*job.Engine, 2)
	for i := range engines {
		cfg := job.Config{Workers: 4, BatchSize: 20}
		if i == 1 {
			cfg.Pool = pool2
		}
		engines[i] = newEngine(t, db, cfg)
		engines[i].Register("noop", func(ctx context.Context, j *job.Job) error {
			if _, loaded := runs.LoadOrStore(j.ID, i); loaded {
				dup.Add(1)
			}
			perEngine[i].Add(1)
			return nil
		}, job.KindOptions{})
	}
	const n = 3000
	enqueueBulk(t, db, engines[0], ten[0], "noop", n)
	enqueueBulk(t, db, engines[0], ten[1], "noop", n)
	for _, e := range engines {
		startEngine(t, e)
	}
	testwait.Within(t, 60*time.Second, "all jobs succeeded", func() bool { return countState(t, db, job.StateSucceeded) == 2*n })
	if dup.Load() != 0 {
		t.Fatalf("%d jobs ran twice", dup.Load())
	}
	if perEngine[0].Load() == 0 || perEngine[1].Load() == 0 {
		t.Fatalf("one engine did all the work: %d / %d", perEngine[0].Load(), perEngine[1].Load())
	}
}

// TestPoolWakesOnNotify: with polling effectively off, a job enqueued
// after start runs promptly because the insert NOTIFYs the workers.
func TestPoolWakesOnNotify(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{Workers: 2, PollInterval: time.Hour})
	ran := make(chan int64, 1)
	e.Register("ping", func(ctx context.Context, j *job.Job) error { ran <- j.ID; return nil }, job.KindOptions{})
	startEngine(t, e)
	// Let the producer finish its first (empty) claim and go to sleep.
	testwait.Within(t, 10*time.Second, "worker registered", func() bool {
		w, _ := e.Workers(context.Background())
		return len(w) == 1
	})
	id := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "ping", Payload: json.RawMessage(`{}`)}).ID
	select {
	case got := <-ran:
		if got != id {
			t.Fatalf("ran %d, want %d", got, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("job not started without polling: NOTIFY did not wake the pool")
	}
}

// TestPoolFailureHandling: unknown kinds fail permanently, expired jobs are
// policy failures (flagged), panics are transient and retried.
func TestPoolFailureHandling(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{Workers: 2, Backoff: func(int) time.Duration { return 0 }})
	var panics atomic.Int64
	e.Register("panics-once", func(ctx context.Context, j *job.Job) error {
		if panics.Add(1) == 1 {
			panic("boom")
		}
		return nil
	}, job.KindOptions{})
	e.Register("never-runs", func(ctx context.Context, j *job.Job) error {
		t.Error("an expired job ran")
		return nil
	}, job.KindOptions{})
	past := time.Now().Add(-time.Hour)
	unknown := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "no.such.kind", Payload: json.RawMessage(`{}`)}).ID
	expired := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "never-runs", Payload: json.RawMessage(`{}`), ExpiresAt: &past}).ID
	panicky := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "panics-once", Payload: json.RawMessage(`{}`)}).ID
	startEngine(t, e)
	testwait.Within(t, 20*time.Second, "jobs finished", func() bool {
		return countState(t, db, job.StateDead) == 2 && countState(t, db, job.StateSucceeded) == 1
	})
	if r, _ := e.Get(ctx, unknown); r.Class != job.ClassPermanent || r.Attempt != 1 {
		t.Errorf("unknown kind: %+v", r)
	}
	if r, _ := e.Get(ctx, expired); r.Class != job.ClassPolicy || !r.Flagged {
		t.Errorf("expired: %+v", r)
	}
	if r, _ := e.Get(ctx, panicky); r.Attempt != 2 || len(r.Errors) != 1 || r.Errors[0].Class != job.ClassTransient {
		t.Errorf("panic: %+v", r)
	}
}

// TestGracefulShutdown: Stop waits for in-flight handlers that finish
// before the deadline (their jobs succeed) and releases the ones that do
// not back to pending without consuming the attempt.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	t.Run("in-flight finish before the deadline", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t)
		tenant := newTenants(t, db, 1)[0]
		e := newEngine(t, db, job.Config{Workers: 2})
		started, finish := make(chan struct{}, 2), make(chan struct{})
		e.Register("slow", func(ctx context.Context, j *job.Job) error {
			started <- struct{}{}
			<-finish
			return nil
		}, job.KindOptions{})
		enqueueBulk(t, db, e, tenant, "slow", 2)
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-started
		<-started
		stopped := make(chan error)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			stopped <- e.Stop(ctx)
		}()
		close(finish)
		if err := <-stopped; err != nil {
			t.Fatalf("stop: %v", err)
		}
		if n := countState(t, db, job.StateSucceeded); n != 2 {
			t.Fatalf("%d succeeded after graceful stop, want 2", n)
		}
		if w, _ := e.Workers(context.Background()); len(w) != 0 {
			t.Fatalf("worker row left behind: %+v", w)
		}
	})
	t.Run("at the deadline, started jobs count their attempt and the rest go back", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t)
		tenant := newTenants(t, db, 1)[0]
		e := newEngine(t, db, job.Config{Workers: 2})
		started := make(chan struct{}, 2)
		e.Register("stuck", func(ctx context.Context, j *job.Job) error {
			started <- struct{}{}
			<-ctx.Done() // only shutdown ends it
			return ctx.Err()
		}, job.KindOptions{})
		enqueueBulk(t, db, e, tenant, "stuck", 5)
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-started
		<-started
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := e.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("stop = %v, want deadline exceeded", err)
		}
		var pending, attempts, histories int
		err := db.Admin.QueryRow(context.Background(),
			`SELECT count(*) FILTER (WHERE state = 'pending'), coalesce(sum(attempt), 0), count(errors)
			   FROM jobs`).Scan(&pending, &attempts, &histories)
		if err != nil {
			t.Fatal(err)
		}
		// The two handlers that had started count their attempt (a handler
		// that ignores cancellation must use up its attempts); the three
		// claimed ahead go back as if never claimed.
		if pending != 5 || attempts != 2 || histories != 2 {
			t.Fatalf("after stop: pending=%d attempts=%d with-history=%d; want 5, 2, 2", pending, attempts, histories)
		}
	})
}

// TestStopReachesItsDeadlineWhileAClaimWaits: a handler holding the
// pool's only connection until it is cancelled leaves the producer's next
// claim waiting for that connection. Stop must still reach its deadline,
// cancel the handler and put its job back.
func TestStopReachesItsDeadlineWhileAClaimWaits(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	pool := poolOfOne(t, db)
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{Pool: pool, Workers: 2, PollInterval: 10 * time.Millisecond, NoMaintenance: true})
	holding := make(chan struct{})
	e.Register("hold", func(ctx context.Context, j *job.Job) error {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		close(holding)
		<-ctx.Done() // only shutdown ends it
		return ctx.Err()
	}, job.KindOptions{})
	enqueueBulk(t, db, e, tenant, "hold", 1)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-holding:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not start within 10 s")
	}
	testwait.Within(t, 10*time.Second, "the next claim waits for the held connection", func() bool {
		return goroutineWaitsIn("job.(*Engine).claimQueue", "pgxpool.(*Pool).Acquire")
	})
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		stopped <- e.Stop(ctx)
	}()
	select {
	case err := <-stopped:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("stop = %v, want deadline exceeded", err)
		}
	case <-time.After(15 * time.Second):
		// The pool is left open: closing it would wait for the handler.
		t.Fatal("Stop did not return within 15 s of a 200 ms deadline: the claim's wait for a connection outlived it")
	}
	pool.Close()
	var state string
	var attempt int
	if err := db.Admin.QueryRow(context.Background(), "SELECT state, attempt FROM jobs WHERE kind = 'hold'").Scan(&state, &attempt); err != nil {
		t.Fatal(err)
	}
	// The handler ignored nothing: it ended with its context, so its
	// attempt counts and the job waits to run again.
	if state != string(job.StatePending) || attempt != 1 {
		t.Fatalf("after stop: state %s, attempt %d; want pending, 1", state, attempt)
	}
}

// goroutineWaitsIn reports whether some goroutine's stack holds every one
// of frames (substrings of function names), as one blocked in a call does.
func goroutineWaitsIn(frames ...string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		all := true
		for _, f := range frames {
			all = all && strings.Contains(g, f)
		}
		if all {
			return true
		}
	}
	return false
}

// TestHeartbeatExtendsLeaseOfLongJob: a job running longer than a
// heartbeat interval gets its lease pushed forward, so rescue leaves it.
func TestHeartbeatExtendsLeaseOfLongJob(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{Workers: 1, LeaseDuration: 3 * time.Second, HeartbeatInterval: 50 * time.Millisecond})
	started, finish := make(chan *job.Job, 1), make(chan struct{})
	e.Register("long", func(ctx context.Context, j *job.Job) error {
		started <- j
		<-finish
		return nil
	}, job.KindOptions{})
	id := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "long", Payload: json.RawMessage(`{}`)}).ID
	startEngine(t, e)
	j := <-started
	testwait.Within(t, 10*time.Second, "lease extended", func() bool {
		r, err := e.Get(ctx, id)
		return err == nil && r.LeaseExpiresAt.After(j.LeaseExpiresAt)
	})
	close(finish)
	testwait.Within(t, 10*time.Second, "job done", func() bool { return countState(t, db, job.StateSucceeded) == 1 })
}

// TestMaintenanceLeaderElection: of two running engines exactly one leads
// maintenance; when it stops, the other takes over.
func TestMaintenanceLeaderElection(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	a := newEngine(t, db, job.Config{MaintenanceInterval: 20 * time.Millisecond})
	b := newEngine(t, db, job.Config{MaintenanceInterval: 20 * time.Millisecond})
	startEngine(t, a)
	testwait.Within(t, 10*time.Second, "a leads", a.IsLeader)
	startEngine(t, b)
	// b retries every 20ms and keeps losing while a lives.
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if b.IsLeader() || !a.IsLeader() {
			t.Fatalf("leaders: a=%v b=%v; want exactly a", a.IsLeader(), b.IsLeader())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.Within(t, 10*time.Second, "b takes over", b.IsLeader)
}

// TestMaintenanceLeaderRefreshesStatistics: a table changed past
// autovacuum's threshold is analyzed by the leader within a few beats, with
// no prune pass due (MaintenanceInterval an hour).
func TestMaintenanceLeaderRefreshesStatistics(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	conn, err := db.Admin.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// A cloned database starts without statistics: no table has been
	// analyzed, and these 500 rows are past 50 + 10 % of the template's.
	if _, err := conn.Exec(ctx, `INSERT INTO tenants (slug, name)
		SELECT 'stats-' || i, 'Stats ' || i FROM generate_series(1, 500) i`); err != nil {
		t.Fatal(err)
	}
	// Counts reach shared memory when the session next goes idle.
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, db, job.Config{HeartbeatInterval: 50 * time.Millisecond, MaintenanceInterval: time.Hour})
	startEngine(t, e)
	testwait.Within(t, 10*time.Second, "tenants analyzed", func() bool {
		var analyzed bool
		if err := db.Admin.QueryRow(ctx, `SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'tenants'`).Scan(&analyzed); err != nil {
			t.Fatal(err)
		}
		return analyzed
	})
}

// TestMaintenanceLeaderOutlivesItsSession: a leader whose session ends
// (terminated here; a server restart or its idle timeout do the same)
// stops leading and wins the lock again on a new session, and that session
// stays open past the idle timeout set to the lease. With a sensitive kind
// registered, rescue runs on the pool, so nothing else speaks on the
// leader's session between prune passes. The lease is thirty beats: a
// loaded machine (two packages' tests and their server on two cores) can
// hold a beat back by a few hundred milliseconds, which is not what this
// test is about.
func TestMaintenanceLeaderOutlivesItsSession(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	const lease = 1500 * time.Millisecond
	e := newEngine(t, db, job.Config{LeaseDuration: lease, HeartbeatInterval: 50 * time.Millisecond, MaintenanceInterval: time.Hour})
	e.Register("user.disable-access", func(context.Context, *job.Job) error { return nil }, job.KindOptions{Sensitive: true})
	startEngine(t, e)
	holder := func() int32 {
		var pid int32
		err := db.Admin.QueryRow(ctx, `SELECT coalesce(max(l.pid), 0) FROM pg_locks l
			 WHERE l.locktype = 'advisory' AND l.granted AND l.objid = 727275
			   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&pid)
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	testwait.Within(t, 10*time.Second, "leads", func() bool { return e.IsLeader() && holder() != 0 })
	first := holder()
	if _, err := db.Admin.Exec(ctx, "SELECT pg_terminate_backend($1)", first); err != nil {
		t.Fatal(err)
	}
	testwait.Within(t, 10*time.Second, "leads on a new session", func() bool {
		p := holder()
		return p != 0 && p != first && e.IsLeader()
	})
	second := holder()
	for end := time.Now().Add(2 * lease); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if p := holder(); p != second || !e.IsLeader() {
			t.Fatalf("leader's session %d gave way to %d (leading: %v) within two idle timeouts", second, p, e.IsLeader())
		}
	}
}

// TestLeaderLeavesThePoolItsConnections: the maintenance leader, the
// listener and the heartbeat each speak on a session of their own, so an
// engine on a pool of one connection leads and still runs its jobs on
// that connection.
func TestLeaderLeavesThePoolItsConnections(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	pool := poolOfOne(t, db)
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{Pool: pool, Workers: 2})
	var ran atomic.Int64
	e.Register("ping", func(context.Context, *job.Job) error { ran.Add(1); return nil }, job.KindOptions{})
	for range 5 {
		enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "ping", Payload: json.RawMessage(`{}`)})
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A session that keeps the pool's one connection for good would also
	// keep Stop waiting for a connection to put jobs back and leave: fail
	// then, rather than hang until the package's timeout (the pool is left
	// open).
	t.Cleanup(func() {
		stopped := make(chan struct{})
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = e.Stop(ctx)
			close(stopped)
		}()
		select {
		case <-stopped:
			pool.Close()
		case <-time.After(15 * time.Second):
			t.Error("the engine did not stop within 15 s: something holds the pool's one connection")
		}
	})
	testwait.Within(t, 10*time.Second, "the engine leads", e.IsLeader)
	testwait.Within(t, 10*time.Second, "five jobs run on the pool's one connection", func() bool {
		var done int
		if err := db.Admin.QueryRow(context.Background(), "SELECT count(*) FROM jobs WHERE kind = 'ping' AND state = 'succeeded'").Scan(&done); err != nil {
			t.Fatal(err)
		}
		return done == 5
	})
	if !e.IsLeader() || ran.Load() != 5 {
		t.Fatalf("leading %v, ran %d; want leading, 5", e.IsLeader(), ran.Load())
	}
}
