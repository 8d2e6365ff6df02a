package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// TestLostLeaseCancelsHandler: when the heartbeat learns that a running
// job's claim is gone (here an operator handed it back to pending), the
// handler's context is cancelled with ErrLeaseLost, and whatever the
// handler returns afterwards does not finish the job.
func TestLostLeaseCancelsHandler(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{Workers: 1, LeaseDuration: 2 * time.Second, HeartbeatInterval: 50 * time.Millisecond})
	started, cause := make(chan struct{}), make(chan error, 1)
	e.Register("long", func(ctx context.Context, j *job.Job) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil // a handler that claims success after losing its lease
	}, job.KindOptions{})
	id := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "long", Payload: json.RawMessage(`{}`)}).ID
	startEngine(t, e)
	<-started
	if _, err := db.Admin.Exec(ctx, `UPDATE jobs SET state = 'pending', lease_expires_at = NULL,
		available_at = now() + interval '1 hour' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cause:
		if !errors.Is(err, job.ErrLeaseLost) {
			t.Fatalf("handler cancelled with %v, want ErrLeaseLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler not cancelled after its lease was lost")
	}
	// The late "success" must not have completed the job. Stop waits for
	// the worker, so its handling of the late result is over.
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	r, err := e.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != job.StatePending {
		t.Fatalf("job state %s after a lost-lease completion, want pending", r.State)
	}
}

// TestCompletionFencedByAttempt: a completion (or failure, delay, or release)
// from an earlier attempt never ends a later one, even when the same
// worker claimed both.
func TestCompletionFencedByAttempt(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenants(t, db, 1)[0]
	clk := clock.NewFrozen(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	e := newEngine(t, db, job.Config{Clock: clk, LeaseDuration: time.Minute})
	id := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "k", Payload: json.RawMessage(`{}`)}).ID
	first, err := e.Claim(ctx, "w", 1)
	if err != nil || len(first) != 1 || first[0].Attempt != 1 {
		t.Fatalf("first claim = %v, %v", first, err)
	}
	clk.Advance(2 * time.Minute) // attempt 1's worker went quiet
	if n, err := e.RescueExpired(ctx); err != nil || n != 1 {
		t.Fatalf("rescue = %d, %v", n, err)
	}
	second, err := e.Claim(ctx, "w", 1)
	if err != nil || len(second) != 1 || second[0].Attempt != 2 {
		t.Fatalf("second claim = %v, %v", second, err)
	}
	if err := e.CompleteAttempt(ctx, "w", tenant, id, 1); !errors.Is(err, job.ErrNotHeld) {
		t.Fatalf("late completion of attempt 1 = %v, want ErrNotHeld", err)
	}
	if _, err := e.FailAttempt(ctx, "w", tenant, id, 1, errors.New("late")); !errors.Is(err, job.ErrNotHeld) {
		t.Fatalf("late failure of attempt 1 = %v, want ErrNotHeld", err)
	}
	late := *first[0]
	late.WorkerID = "w"
	if err := e.DelayJob(ctx, &late, time.Minute, "lock_busy"); !errors.Is(err, job.ErrNotHeld) {
		t.Fatalf("late delay of attempt 1 = %v, want ErrNotHeld", err)
	}
	r, _ := e.Get(ctx, id)
	if r.State != job.StateRunning || r.Attempt != 2 {
		t.Fatalf("after late attempt-1 writes: state %s attempt %d, want running 2", r.State, r.Attempt)
	}
	// The job is addressed by (tenant, id): the right attempt under another
	// tenant's id is not this job.
	if err := e.CompleteAttempt(ctx, "w", tenant+1, id, 2); !errors.Is(err, job.ErrNotHeld) {
		t.Fatalf("completion under another tenant = %v, want ErrNotHeld", err)
	}
	if err := e.CompleteAttempt(ctx, "w", tenant, id, 2); err != nil {
		t.Fatalf("completion of the held attempt: %v", err)
	}
}

// TestExpiryCheckedAtStart: a job claimed ahead that expires while it
// waits for a worker is refused when its handler would start, not run.
func TestExpiryCheckedAtStart(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenants(t, db, 1)[0]
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFrozen(t0)
	// A lease far longer than the clock's jump: rescue must not take the
	// running first job back when the frozen clock moves.
	e := newEngine(t, db, job.Config{Clock: clk, Workers: 1, Backoff: fixedBackoff, LeaseDuration: time.Hour})
	started, release := make(chan string, 2), make(chan struct{})
	e.Register("k", func(ctx context.Context, j *job.Job) error {
		var p struct{ Name string }
		_ = json.Unmarshal(j.Payload, &p)
		started <- p.Name
		if p.Name == "first" {
			<-release
		}
		return nil
	}, job.KindOptions{})
	enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "k", Payload: json.RawMessage(`{"name":"first"}`)})
	exp := t0.Add(time.Minute)
	second := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "k", ExpiresAt: &exp,
		Payload: json.RawMessage(`{"name":"second"}`)}).ID
	startEngine(t, e)
	if got := <-started; got != "first" {
		t.Fatalf("started %q first", got)
	}
	// The second job is claimed ahead (valid at claim) while the first runs.
	testwait.Within(t, 10*time.Second, "second claimed ahead", func() bool {
		r, err := e.Get(ctx, second)
		return err == nil && r.State == job.StateRunning
	})
	clk.Advance(2 * time.Minute)
	close(release)
	testwait.Within(t, 10*time.Second, "second refused", func() bool {
		r, err := e.Get(ctx, second)
		return err == nil && r.State == job.StateDead
	})
	r, _ := e.Get(ctx, second)
	if r.Class != job.ClassPolicy || !r.Flagged || !strings.Contains(r.LastError, job.ErrExpired.Error()) {
		t.Fatalf("expired job: class %s flagged %v error %q", r.Class, r.Flagged, r.LastError)
	}
	select {
	case name := <-started:
		t.Fatalf("handler ran %q after it expired", name)
	default:
	}
}

// TestTamperedPayloadRefusedAtStart: a payload edited in the row after
// enqueue (with a recomputed plain SHA-256) is a policy failure; the
// handler never sees it.
func TestTamperedPayloadRefusedAtStart(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{Workers: 1})
	ran := make(chan struct{}, 1)
	e.Register("k", func(ctx context.Context, j *job.Job) error { ran <- struct{}{}; return nil }, job.KindOptions{})
	id := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "k", Payload: json.RawMessage(`{"amount":1}`)}).ID
	if _, err := db.Admin.Exec(ctx, `UPDATE jobs SET payload = '{"amount": 1000000}',
		payload_hash = sha256(convert_to('{"amount": 1000000}', 'UTF8')) WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	startEngine(t, e)
	testwait.Within(t, 10*time.Second, "tampered job refused", func() bool {
		r, err := e.Get(ctx, id)
		return err == nil && r.State == job.StateDead
	})
	r, _ := e.Get(ctx, id)
	if r.Class != job.ClassPolicy || !r.Flagged || !strings.Contains(r.LastError, job.ErrPayloadTampered.Error()) {
		t.Fatalf("tampered job: class %s flagged %v error %q", r.Class, r.Flagged, r.LastError)
	}
	select {
	case <-ran:
		t.Fatal("handler ran a tampered payload")
	default:
	}
}

// TestClaimVerdictIsPerRow: the claim's tamper verdict belongs to each
// row, on the fair claim (more due than the batch) and on the idle
// queue's claim (the rest fits): only the edited payloads fail to verify.
func TestClaimVerdictIsPerRow(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenants := newTenants(t, db, 2)
	e := newEngine(t, db, job.Config{})
	tampered := map[int64]bool{}
	for i := 0; i < 8; i++ {
		id := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenants[i%2], Kind: "k",
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}).ID
		if i%3 == 1 {
			tampered[id] = true
			if _, err := db.Admin.Exec(ctx, `UPDATE jobs SET payload = '{"n": -1}' WHERE id = $1`, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	seen := 0
	for _, n := range []int{5, 5} {
		js, err := e.Claim(ctx, "w", n)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range js {
			seen++
			if j.VerifyPayload() == tampered[j.ID] {
				t.Errorf("job %d: verifies %v, tampered %v", j.ID, j.VerifyPayload(), tampered[j.ID])
			}
		}
	}
	if seen != 8 || len(tampered) != 3 {
		t.Fatalf("claimed %d of 8 jobs, %d tampered", seen, len(tampered))
	}
}

// TestClaimCommitSettingStaysInItsTransaction: both claims commit
// asynchronously by setting synchronous_commit for their own transaction
// only; the pooled connection they ran on (the only one here) still
// commits synchronously afterwards, and what they claimed is committed.
func TestClaimCommitSettingStaysInItsTransaction(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	pool, err := database.OpenSystem(ctx, db.URL, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	tenants := newTenants(t, db, 2)
	e := newEngine(t, db, job.Config{Pool: pool})
	for i := 0; i < 6; i++ {
		enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenants[i%2], Kind: "k", Payload: json.RawMessage(`{}`)})
	}
	// 4 of 6 due: the fair claim; then the remaining 2 fit the idle claim.
	for _, n := range []int{4, 4} {
		js, err := e.Claim(ctx, "w", n)
		if err != nil || len(js) == 0 {
			t.Fatalf("claim = %d, %v", len(js), err)
		}
		var setting string
		if err := pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting); err != nil {
			t.Fatal(err)
		}
		if setting != "on" {
			t.Fatalf("after a claim the connection commits with synchronous_commit=%s", setting)
		}
	}
	var running int
	if err := db.Admin.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE state = 'running'").Scan(&running); err != nil {
		t.Fatal(err)
	}
	if running != 6 {
		t.Fatalf("%d jobs running after the claims, want 6", running)
	}
}

// TestVanishedWorkersJobsRunElsewhere: a worker that claimed jobs and then
// stopped renewing (a crashed replica: nothing releases its claims) loses
// them one lease later; a live engine runs them.
func TestVanishedWorkersJobsRunElsewhere(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenants(t, db, 1)[0]
	cfg := job.Config{Workers: 2, LeaseDuration: time.Second, HeartbeatInterval: 100 * time.Millisecond}
	dead := newEngine(t, db, cfg)
	enqueueBulk(t, db, dead, tenant, "k", 5)
	// The crashed replica: claimed everything, then vanished.
	if js, err := dead.Claim(ctx, "crashed-replica", 5); err != nil || len(js) != 5 {
		t.Fatalf("claim = %d, %v", len(js), err)
	}
	live := newEngine(t, db, cfg)
	live.Register("k", func(ctx context.Context, j *job.Job) error { return nil }, job.KindOptions{})
	began := time.Now()
	startEngine(t, live)
	testwait.Within(t, 10*time.Second, "rescued jobs done", func() bool { return countState(t, db, job.StateSucceeded) == 5 })
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("vanished worker's jobs took %s to run elsewhere with a 1s lease", took)
	}
	var attempts int
	if err := db.Admin.QueryRow(ctx, `SELECT sum(attempt) FROM jobs`).Scan(&attempts); err != nil || attempts != 10 {
		t.Fatalf("attempts = %d (%v), want 2 per job (lost one + the run)", attempts, err)
	}
}
