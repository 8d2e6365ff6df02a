package sensitive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/queries"
)

// Key is one entry of the idempotency store.
type Key struct {
	TenantID         int64
	Key              string
	Action           string
	Target           string
	Status           string // "started" or "completed"
	ResultRef        string
	JobID            *int64
	FirstProcessedAt time.Time
	// First is true when this call inserted the key: no earlier
	// processing exists.
	First bool
}

// Key statuses.
const (
	KeyStarted   = "started"
	KeyCompleted = "completed"
)

// ClaimKey claims an idempotency key with one INSERT … ON CONFLICT DO
// NOTHING (never check-then-act): the caller that inserts it is the first;
// everyone else gets the stored entry back. Two concurrent claims of one
// key serialize on the unique index, so exactly one is First.
func ClaimKey(ctx context.Context, q database.Querier, now time.Time, tenantID int64, key, action, target string, jobID *int64) (Key, error) {
	qs := queries.New(q)
	r, err := qs.IdempotencyClaim(ctx, queries.IdempotencyClaimParams{
		TenantID: tenantID, Key: key, Action: action, Target: target, JobID: jobID, FirstProcessedAt: now,
	})
	if err == nil {
		return keyFrom(r, true), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Key{}, fmt.Errorf("claim idempotency key %q: %w", key, err)
	}
	r, err = qs.IdempotencyGet(ctx, queries.IdempotencyGetParams{TenantID: tenantID, Key: key})
	if err != nil {
		return Key{}, fmt.Errorf("read idempotency key %q: %w", key, err)
	}
	return keyFrom(r, false), nil
}

// CompleteKey records the key's effect as done, with a reference to its
// result (e.g. a charge id), so replays can return it.
func CompleteKey(ctx context.Context, q database.Querier, now time.Time, tenantID int64, key, resultRef string) error {
	err := queries.New(q).IdempotencyComplete(ctx, queries.IdempotencyCompleteParams{
		TenantID: tenantID, Key: key, ResultRef: &resultRef, CompletedAt: &now,
	})
	if err != nil {
		return fmt.Errorf("complete idempotency key %q: %w", key, err)
	}
	return nil
}

func keyFrom(r queries.IdempotencyKey, first bool) Key {
	k := Key{TenantID: r.TenantID, Key: r.Key, Action: r.Action, Target: r.Target, Status: r.Status,
		JobID: r.JobID, FirstProcessedAt: r.FirstProcessedAt, First: first}
	if r.ResultRef != nil {
		k.ResultRef = *r.ResultRef
	}
	return k
}

// RecordSkipped writes the job's skipped stage (an idempotent replay: the
// effect happened before, under the stored key) in tx.
func RecordSkipped(ctx context.Context, tx pgx.Tx, c clock.Clock, j *job.Job, k Key) error {
	detail := fmt.Sprintf(`{"idempotency_key":%q,"result_ref":%q,"first_processed_at":%q}`,
		k.Key, k.ResultRef, k.FirstProcessedAt.UTC().Format(time.RFC3339Nano))
	if k.JobID != nil {
		detail = detail[:len(detail)-1] + fmt.Sprintf(`,"first_job_id":%d}`, *k.JobID)
	}
	err := audit.NewRecorder(c).RecordJobEvent(ctx, tx, audit.JobEvent{
		TenantID: j.TenantID, JobID: j.ID, Kind: j.Kind, Stage: audit.JobSkipped, WorkerID: j.WorkerID,
		Attempt: j.Attempt, TraceID: j.TraceID, Reason: "already_processed", Detail: []byte(detail),
	})
	return err
}

// LockBusyRetry is how long a job waits before trying a busy lock again.
const LockBusyRetry = 5 * time.Second

// Lock is a resource lock with a lease on a resource such as
// "user:987" or "invoice:12". It is committed on its own, before the
// effect's transaction, so other replicas see it; the effect's
// transaction releases it on success, and a crashed holder's lock is
// taken over once its lease has passed.
type Lock struct {
	Resource string
	Holder   string
}

// AcquireLock takes resource for holder until now+lease. It reports false,
// without error, when another holder's lease is still running. A holder
// re-acquiring its own lock (a retry) extends it.
func AcquireLock(ctx context.Context, db database.Querier, now time.Time, tenantID int64, resource, holder string, lease time.Duration) (*Lock, bool, error) {
	_, err := queries.New(db).LockAcquire(ctx, queries.LockAcquireParams{
		Resource: resource, TenantID: tenantID, Holder: holder, Now: now, LeaseExpiresAt: now.Add(lease),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("acquire lock %s: %w", resource, err)
	}
	return &Lock{Resource: resource, Holder: holder}, true, nil
}

// Release drops the lock if holder still has it (a lock taken over after
// its lease ran out is not ours to drop).
func (l *Lock) Release(ctx context.Context, db database.Querier) error {
	if l == nil {
		return nil
	}
	if _, err := queries.New(db).LockRelease(ctx, queries.LockReleaseParams{Resource: l.Resource, Holder: l.Holder}); err != nil {
		return fmt.Errorf("release lock %s: %w", l.Resource, err)
	}
	return nil
}

// HolderOf names a job as a lock holder.
func HolderOf(j *job.Job) string { return fmt.Sprintf("job:%d", j.ID) }

// LockBusy is the delay a handler returns when its resource is held.
func LockBusy(resource string) error { return job.Delay(LockBusyRetry, "lock_busy:"+resource) }

// approvalRow is what re-authorization reads of an approval.
type approvalRow struct {
	ID, TenantID, TargetID, RequestedBy int64
	Action, State, Reason               string
	DecidedBy, ConsumedByJob            *int64
	ConsumedAt                          *time.Time
}

// lockApproval reads an approval FOR UPDATE (pgx.ErrNoRows if absent).
func lockApproval(ctx context.Context, tx pgx.Tx, id int64) (approvalRow, error) {
	r, err := queries.New(tx).ApprovalLock(ctx, id)
	if err != nil {
		return approvalRow{}, err
	}
	return approvalRow{ID: r.ID, TenantID: r.TenantID, TargetID: r.TargetID, RequestedBy: r.RequestedBy, Action: r.Action,
		State: r.State, Reason: r.Reason, DecidedBy: r.DecidedBy, ConsumedByJob: r.ConsumedByJob, ConsumedAt: r.ConsumedAt}, nil
}

// consumeApproval marks the approval used by jobID; pgx.ErrNoRows when it
// was used already (single use).
func consumeApproval(ctx context.Context, tx pgx.Tx, id, jobID int64, now time.Time) error {
	_, err := queries.New(tx).ApprovalConsume(ctx, queries.ApprovalConsumeParams{Now: &now, JobID: &jobID, ID: id})
	return err
}

// staffRow is what re-authorization reads of a user.
type staffRow struct {
	Active bool
	Role   *string
}

func getStaff(ctx context.Context, tx pgx.Tx, id int64) (staffRow, error) {
	u, err := queries.New(tx).UserGetByID(ctx, id)
	if err != nil {
		return staffRow{}, err
	}
	return staffRow{Active: u.Active, Role: u.StaffRole}, nil
}
