package approval_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/approval"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/kinds"
	"github.com/jejakhq/jejak/internal/sensitive"
	"github.com/jejakhq/jejak/internal/testdb"
)

type env struct {
	t       *testing.T
	db      *testdb.DB
	clk     *clock.Frozen
	engine  *job.Engine
	svc     *approval.Service
	tenant  int64
	rina    int64
	support int64
	admin   int64
}

func setup(t *testing.T) *env {
	t.Helper()
	db := testdb.New(t)
	ctx := context.Background()
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFrozen(time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC))
	e, err := job.New(job.Config{Pool: db.System, Clock: clk, WorkerID: "approval-test", Backoff: func(int) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(e)
	}
	kinds.Register(e, kinds.Deps{App: db.App, System: db.System, Clock: clk})
	v := &env{t: t, db: db, clk: clk, engine: e, svc: approval.NewService(db.System, e, clk)}
	v.tenant = v.id(`SELECT id FROM tenants WHERE slug = 'toko-bunga-melati'`)
	v.rina = v.id(`SELECT id FROM users WHERE email = 'rina@melati.test'`)
	v.support = v.id(`SELECT id FROM users WHERE email = 'support@jejak.test'`)
	v.admin = v.id(`SELECT id FROM users WHERE email = 'admin@jejak.test'`)
	return v
}

func (v *env) id(sql string, args ...any) int64 {
	v.t.Helper()
	var id int64
	if err := v.db.Admin.QueryRow(context.Background(), sql, args...).Scan(&id); err != nil {
		v.t.Fatalf("%s: %v", sql, err)
	}
	return id
}

func (v *env) approved() (*approval.Approval, int64) {
	v.t.Helper()
	ctx := context.Background()
	a, err := v.svc.RequestDisable(ctx, approval.Staff{UserID: v.support, TraceID: "trace-disable"}, v.tenant, v.rina, "laptop hilang")
	if err != nil {
		v.t.Fatal(err)
	}
	a, err = v.svc.Approve(ctx, approval.Staff{UserID: v.admin}, a.ID, "")
	if err != nil {
		v.t.Fatal(err)
	}
	return a, *a.JobID
}

func (v *env) work() {
	v.t.Helper()
	if _, err := v.engine.WorkOnce(context.Background(), 10); err != nil {
		v.t.Fatal(err)
	}
}

func (v *env) job(id int64) (state string, attempt int, available time.Time) {
	v.t.Helper()
	if err := v.db.Admin.QueryRow(context.Background(), `SELECT state, attempt, available_at FROM jobs WHERE id = $1`, id).Scan(&state, &attempt, &available); err != nil {
		v.t.Fatal(err)
	}
	return
}

func (v *env) stages(jobID int64) []string {
	v.t.Helper()
	rows, err := v.db.Admin.Query(context.Background(), `SELECT action || coalesce(':' || (detail->>'reason'), '') FROM audit_events WHERE job_id = $1 AND action LIKE 'job.%' ORDER BY seq`, jobID)
	if err != nil {
		v.t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		v.t.Fatal(err)
	}
	return out
}

// TestLockContentionDelaysAndExpiryReleases: while another holder's lease
// on user:<id> runs, the job is delayed (attempt given back, delayed event
// naming the lock); once that holder's lease passes (it crashed), the job
// takes the lock over and runs; the lock is released with the effect.
func TestLockContentionDelaysAndExpiryReleases(t *testing.T) {
	t.Parallel()
	v := setup(t)
	ctx := context.Background()
	_, jobID := v.approved()
	now := *v.clk.Now()
	resource := "user:" + itoa(v.rina)
	if _, ok, err := sensitive.AcquireLock(ctx, v.db.System, now, v.tenant, resource, "job:crashed", time.Minute); err != nil || !ok {
		t.Fatalf("pre-take lock: %v %v", ok, err)
	}
	v.work()
	st, attempt, avail := v.job(jobID)
	if st != "pending" || attempt != 0 || !avail.Equal(now.Add(sensitive.LockBusyRetry)) {
		t.Fatalf("busy lock: state %s attempt %d available %s", st, attempt, avail)
	}
	v.clk.Advance(10 * time.Second)
	v.work()
	if st, attempt, _ := v.job(jobID); st != "pending" || attempt != 0 {
		t.Fatalf("still busy: %s %d", st, attempt)
	}
	v.clk.Advance(time.Minute) // the crashed holder's lease has passed
	v.work()
	if st, attempt, _ := v.job(jobID); st != "succeeded" || attempt != 1 {
		t.Fatalf("after expiry: %s attempt %d", st, attempt)
	}
	got := v.stages(jobID)
	want := []string{"job.queued", "job.claimed", "job.started", "job.delayed:lock_busy:" + resource,
		"job.claimed", "job.started", "job.delayed:lock_busy:" + resource, "job.claimed", "job.started", "job.succeeded"}
	if len(got) != len(want) {
		t.Fatalf("stages %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("stage %d: %s, want %s (all %v)", i, got[i], want[i], got)
		}
	}
	if n := v.id(`SELECT count(*) FROM resource_locks`); n != 0 {
		t.Fatalf("%d locks left", n)
	}
}

// TestDuplicateDeliveryIsSkipped: the job is delivered again after it
// succeeded (lost ack); the idempotency store answers, the second run
// records skipped with the stored result, and nothing is rejected or
// done twice.
func TestDuplicateDeliveryIsSkipped(t *testing.T) {
	t.Parallel()
	v := setup(t)
	_, jobID := v.approved()
	v.work()
	// Lost ack: the job comes back as if its completion never arrived.
	if _, err := v.db.Admin.Exec(context.Background(), `UPDATE jobs SET state = 'pending', finished_at = NULL WHERE id = $1`, jobID); err != nil {
		t.Fatal(err)
	}
	v.work()
	if st, _, _ := v.job(jobID); st != "succeeded" {
		t.Fatalf("redelivered job is %s", st)
	}
	stages := v.stages(jobID)
	if stages[len(stages)-2] != "job.skipped:already_processed" {
		t.Fatalf("stages %v", stages)
	}
	if n := v.id(`SELECT count(*) FROM audit_events WHERE action = 'member.access_disabled'`); n != 1 {
		t.Fatalf("effect recorded %d times", n)
	}
	var ref, status string
	if err := v.db.Admin.QueryRow(context.Background(), `SELECT status, result_ref FROM idempotency_keys WHERE job_id = $1`, jobID).Scan(&status, &ref); err != nil {
		t.Fatal(err)
	}
	if status != "completed" || ref != "membership:"+itoa(v.rina)+":disabled" {
		t.Fatalf("key %s %s", status, ref)
	}
}

// TestExpiredJobRejected: a job that waited past its TTL is rejected at
// dequeue, not run.
func TestExpiredJobRejected(t *testing.T) {
	t.Parallel()
	v := setup(t)
	_, jobID := v.approved()
	v.clk.Advance(approval.JobTTL + time.Second)
	v.work()
	if st, _, _ := v.job(jobID); st != "dead" {
		t.Fatalf("expired job is %s", st)
	}
	if n := v.id(`SELECT count(*) FROM memberships WHERE disabled_at IS NOT NULL`); n != 0 {
		t.Fatal("expired job had an effect")
	}
	if n := v.id(`SELECT count(*) FROM approvals WHERE consumed_at IS NOT NULL`); n != 0 {
		t.Fatal("expired job consumed the approval")
	}
}

// TestApprovalExpiresUnapproved and self-approval at the service level.
func TestApprovalRules(t *testing.T) {
	t.Parallel()
	v := setup(t)
	ctx := context.Background()
	a, err := v.svc.RequestDisable(ctx, approval.Staff{UserID: v.support}, v.tenant, v.rina, "alasan")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.svc.Approve(ctx, approval.Staff{UserID: v.support}, a.ID, ""); err != approval.ErrSelfApproval {
		t.Fatalf("self approval: %v", err)
	}
	if _, err := v.svc.RequestDisable(ctx, approval.Staff{UserID: v.admin}, v.tenant, v.rina, "lagi"); err != approval.ErrDuplicate {
		t.Fatalf("duplicate request: %v", err)
	}
	budi := v.id(`SELECT id FROM users WHERE email = 'budi@melati.test'`)
	if _, err := v.svc.RequestDisable(ctx, approval.Staff{UserID: v.support}, v.tenant, budi, "pemilik"); err != approval.ErrLastOwner {
		t.Fatalf("disabling the only owner: %v", err)
	}
	if _, err := v.svc.Approve(ctx, approval.Staff{UserID: budi}, a.ID, ""); err != approval.ErrNotStaff {
		t.Fatalf("tenant owner approving: %v", err)
	}
	// The database refuses self-approval too.
	if _, err := v.db.Admin.Exec(ctx, `UPDATE approvals SET state = 'approved', decided_by = requested_by, decided_at = now() WHERE id = $1`, a.ID); err == nil {
		t.Fatal("database accepted a self-approval")
	}
	v.clk.Advance(approval.RequestTTL)
	if _, err := v.svc.Approve(ctx, approval.Staff{UserID: v.admin}, a.ID, ""); err != approval.ErrExpired {
		t.Fatalf("late approval: %v", err)
	}
}

// TestIdempotencyClaimIsAtomic: many concurrent claims of one key, each in
// its own transaction; exactly one is first.
func TestIdempotencyClaimIsAtomic(t *testing.T) {
	t.Parallel()
	v := setup(t)
	ctx := context.Background()
	var mu sync.Mutex
	firsts := 0
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := database.InTx(ctx, v.db.System, func(tx pgx.Tx) error {
				k, err := sensitive.ClaimKey(ctx, tx, *v.clk.Now(), v.tenant, "invoice:1", "payment.charge", "invoice:1", nil)
				if err != nil {
					return err
				}
				if k.First {
					mu.Lock()
					firsts++
					mu.Unlock()
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if firsts != 1 {
		t.Fatalf("%d claims were first", firsts)
	}
}

func itoa(n int64) string { return fmtInt(n) }
