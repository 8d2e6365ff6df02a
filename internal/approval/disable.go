package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/sensitive"
	"github.com/jejakhq/jejak/internal/tenant"
)

// DisableHandler runs user.disable-access: under the lock user:<id>, in one
// transaction on the system pool, it claims the job's idempotency key
// (a replay of a completed key is skipped), re-authorizes the job
// (sensitive.Authorize consumes the approval), disables the membership,
// deletes the user's sessions and records it all in the tenant's trail.
type DisableHandler struct {
	System database.Pool
	Clock  clock.Clock
	// LockLease bounds how long a crashed holder keeps user:<id>; 0 = 1 min.
	LockLease time.Duration
}

// Handle is the job.Handler.
func (h *DisableHandler) Handle(ctx context.Context, j *job.Job) error {
	p, err := disablePayload(j)
	if err != nil {
		return err
	}
	c := h.Clock
	if c == nil {
		c = clock.Database{}
	}
	lease := h.LockLease
	if lease <= 0 {
		lease = time.Minute
	}
	now, err := sensitive.Now(ctx, h.System, c)
	if err != nil {
		return err
	}
	resource := "user:" + strconv.FormatInt(p.UserID, 10)
	lock, ok, err := sensitive.AcquireLock(ctx, h.System, now, j.TenantID, resource, sensitive.HolderOf(j), lease)
	if err != nil {
		return err
	}
	if !ok {
		return sensitive.LockBusy(resource)
	}
	key := j.IdempotencyKey
	if key == "" {
		key = "approval:" + strconv.FormatInt(p.ApprovalID, 10)
	}
	run := disableRun{j: j, p: p, c: c, now: now, key: key, resource: resource}
	err = database.InTx(ctx, h.System, func(tx pgx.Tx) error {
		if err := run.effect(ctx, tx); err != nil {
			return err
		}
		return lock.Release(ctx, tx)
	})
	if err != nil {
		// The effect rolled back; free the resource now rather than at
		// the end of the lease.
		if rerr := lock.Release(context.WithoutCancel(ctx), h.System); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	return err
}

// disablePayload decodes and checks the job's payload.
func disablePayload(j *job.Job) (DisablePayload, error) {
	var p DisablePayload
	if err := json.Unmarshal(j.Payload, &p); err != nil || p.UserID <= 0 || p.ApprovalID <= 0 {
		return p, job.Permanent(fmt.Errorf("user.disable-access: invalid payload: %.200s", j.Payload))
	}
	if p.TenantID != j.TenantID {
		return p, job.Policy(&sensitive.Rejection{Reason: sensitive.ReasonApprovalMismatch, Detail: "payload tenant differs from job tenant"})
	}
	return p, nil
}

// disableRun is one run of user.disable-access, holding the lock on
// resource.
type disableRun struct {
	j        *job.Job
	p        DisablePayload
	c        clock.Clock
	now      time.Time
	key      string
	resource string
}

// effect claims the idempotency key (a completed key is skipped),
// re-authorizes the job, disables the membership unless that would leave
// the tenant without an active owner, revokes the sessions and records it.
func (r disableRun) effect(ctx context.Context, tx pgx.Tx) error {
	j, p := r.j, r.p
	k, err := sensitive.ClaimKey(ctx, tx, r.now, j.TenantID, r.key, DisableAccessKind, r.resource, &j.ID)
	if err != nil {
		return err
	}
	if !k.First && k.Status == sensitive.KeyCompleted {
		return sensitive.RecordSkipped(ctx, tx, r.c, j, k)
	}
	a, err := sensitive.Authorize(ctx, tx, r.now, j, sensitive.Grant{
		ApprovalID: p.ApprovalID, Action: ActionDisableAccess, TargetID: p.UserID, Roles: StaffRoles,
	})
	if err != nil {
		return err
	}
	// Checked again under the owner lock: an owner may have stepped down
	// since the request was made.
	if err := tenant.KeepOwner(ctx, tx, j.TenantID, 0, p.UserID); errors.Is(err, tenant.ErrLastOwner) {
		return job.Permanent(fmt.Errorf("user.disable-access: %w", ErrLastOwner))
	} else if err != nil {
		return err
	}
	st := newStore(tx)
	result := "disabled"
	changed, err := st.disableMembership(ctx, j.TenantID, p.UserID, r.now, a.Reason)
	if err != nil {
		return err
	}
	if !changed {
		result = "already_disabled"
	}
	revoked, err := st.revokeSessions(ctx, p.UserID)
	if err != nil {
		return err
	}
	detail, _ := json.Marshal(map[string]any{
		"user_id": p.UserID, "approval_id": a.ID, "requested_by": a.RequestedBy, "approved_by": a.DecidedBy,
		"reason": a.Reason, "sessions_revoked": revoked, "result": result, "scope": p.Scope,
	})
	jobID := j.ID
	if err := audit.NewRecorder(r.c).Append(ctx, tx, audit.Event{
		TenantID: j.TenantID, ActorKind: audit.ActorSystem, Action: "member.access_disabled",
		Entity: "user", EntityID: strconv.FormatInt(p.UserID, 10), Detail: detail, TraceID: j.TraceID, JobID: &jobID,
	}); err != nil {
		return fmt.Errorf("audit access disabled: %w", err)
	}
	return sensitive.CompleteKey(ctx, tx, r.now, j.TenantID, r.key, "membership:"+strconv.FormatInt(p.UserID, 10)+":"+result)
}
