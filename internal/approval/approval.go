// Package approval holds two-person actions: a staff member
// requests a sensitive action with a reason, a different staff member
// approves or rejects it, and approving enqueues the job that carries the
// approval. The job consumes the approval exactly once at dequeue
// (sensitive.Authorize). Every step is in the tenant's audit trail under
// the request's trace id, which the job inherits.
package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/console"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/sensitive"
	staffperm "github.com/jejakhq/jejak/internal/staff"
	"github.com/jejakhq/jejak/internal/tenant"
)

// Actions that need two people.
const (
	ActionDisableAccess = "user.disable-access"
	ActionReplay        = "job.replay"
)

// DisableAccessKind is the job kind an approved access revocation runs as.
const DisableAccessKind = "user.disable-access"

// StaffRoles are the roles a requester and an approver must still hold at
// dequeue. Who may request and who may decide is staff.RequestApproval and
// staff.Decide (only admins decide).
var StaffRoles = staffperm.Roles

// Lifetimes: a request waits a day for a second person; the job it leads
// to must start within JobTTL of the approval or it is rejected as stale.
const (
	RequestTTL = 24 * time.Hour
	JobTTL     = 15 * time.Minute
	MaxReason  = 500
)

// States of an approval.
const (
	StatePending  = "pending"
	StateApproved = "approved"
	StateRejected = "rejected"
)

// Errors the web layer maps to HTTP answers.
var (
	ErrNotFound     = apperr.NotFound("approval not found")
	ErrSelfApproval = apperr.Forbidden("you requested this action: a different staff member must approve it")
	ErrNotStaff     = apperr.Forbidden("only support staff can request or decide sensitive actions")
	ErrDecided      = &apperr.Error{Code: apperr.CodeConflict, Message: "this request was already decided"}
	ErrExpired      = &apperr.Error{Code: apperr.CodeConflict, Message: "this request expired before anyone approved it"}
	ErrDuplicate    = &apperr.Error{Code: apperr.CodeConflict, Message: "an identical request is already waiting for approval"}
	ErrNoMember     = apperr.NotFound("no such member in this tenant")
	ErrDisabled     = &apperr.Error{Code: apperr.CodeConflict, Message: "this member's access is already disabled"}
	ErrLastOwner    = &apperr.Error{Code: apperr.CodeConflict, Message: "this is the tenant's only active owner: add another owner first"}
)

// Approval is one request and its decision.
type Approval struct {
	ID             int64
	TenantID       int64
	Action         string
	TargetID       int64
	Reason         string
	RequestedBy    int64
	RequestedAt    time.Time
	ExpiresAt      time.Time
	State          string
	DecidedBy      *int64
	DecidedAt      *time.Time
	DecisionReason string
	JobID          *int64
	ConsumedAt     *time.Time
	ConsumedByJob  *int64
	TraceID        string
}

// Staff is the staff member acting.
type Staff struct {
	UserID  int64
	TraceID string
}

// Enqueuer is the part of the job engine an approval needs.
type Enqueuer interface {
	Enqueue(ctx context.Context, tx job.Querier, p job.EnqueueParams) (job.Enqueued, error)
}

// DisablePayload is the payload of user.disable-access.
type DisablePayload struct {
	TenantID   int64  `json:"tenant_id"`
	UserID     int64  `json:"user_id"`
	ApprovalID int64  `json:"approval_id"`
	Scope      string `json:"scope"` // "tenant": memberships and sessions for this tenant
	Reason     string `json:"reason"`
}

// Replayer retries a dead letter (the staff console).
type Replayer interface {
	Act(ctx context.Context, op console.Operator, action console.Action, id int64, reason string) (tenant.Name, error)
}

// Service requests, decides and lists approvals on the system pool (staff
// act across tenants).
type Service struct {
	system database.Pool
	clock  clock.Clock
	rec    *audit.Recorder
	jobs   Enqueuer
	replay Replayer
}

// WithReplayer lets approved job.replay requests retry their dead job.
func (s *Service) WithReplayer(r Replayer) *Service {
	s.replay = r
	return s
}

// NewService returns a Service; jobs enqueues the approved work.
func NewService(system database.Pool, jobs Enqueuer, c clock.Clock) *Service {
	if c == nil {
		c = clock.Database{}
	}
	return &Service{system: system, clock: c, rec: audit.NewRecorder(c), jobs: jobs}
}

// CheckReason trims and validates a reason (required, at most 500 runes).
func CheckReason(reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return "", apperr.Invalid("reason", "A reason is required.")
	}
	if utf8.RuneCountInString(reason) > MaxReason || !utf8.ValidString(reason) || strings.ContainsRune(reason, 0) {
		return "", apperr.Invalidf("reason", "A reason is at most %d characters of text.", MaxReason)
	}
	return reason, nil
}

// RequestDisable asks for userID's access to tenantID to be disabled. It
// creates a pending approval (no job yet) and records approval.requested.
func (s *Service) RequestDisable(ctx context.Context, staff Staff, tenantID, userID int64, reason string) (*Approval, error) {
	reason, err := CheckReason(reason)
	if err != nil {
		return nil, err
	}
	var out *Approval
	err = database.InTx(ctx, s.system, func(tx pgx.Tx) error {
		st := newStore(tx)
		if err := requirePermission(ctx, st, staff.UserID, staffperm.RequestApproval); err != nil {
			return err
		}
		m, err := st.membership(ctx, tenantID, userID)
		if err != nil {
			return err
		}
		if m.Disabled {
			return ErrDisabled
		}
		if m.Role == "owner" {
			n, err := st.otherActiveOwners(ctx, tenantID, userID)
			if err != nil {
				return err
			}
			if n == 0 {
				return ErrLastOwner
			}
		}
		out, err = s.request(ctx, tx, staff, tenantID, ActionDisableAccess, userID, reason,
			map[string]any{"user_id": userID, "role": m.Role})
		return err
	})
	return out, err
}

// RequestReplay asks for a dead sensitive job to be run again.
func (s *Service) RequestReplay(ctx context.Context, staff Staff, tenantID, jobID int64, kind, reason string) (*Approval, error) {
	reason, err := CheckReason(reason)
	if err != nil {
		return nil, err
	}
	var out *Approval
	err = database.InTx(ctx, s.system, func(tx pgx.Tx) error {
		if err := requirePermission(ctx, newStore(tx), staff.UserID, staffperm.RequestApproval); err != nil {
			return err
		}
		out, err = s.request(ctx, tx, staff, tenantID, ActionReplay, jobID, reason, map[string]any{"job_id": jobID, "kind": kind})
		return err
	})
	return out, err
}

func (s *Service) request(ctx context.Context, tx pgx.Tx, staff Staff, tenantID int64, action string, target int64, reason string, detail map[string]any) (*Approval, error) {
	st := newStore(tx)
	n, err := st.pendingFor(ctx, tenantID, action, target)
	if err != nil {
		return nil, fmt.Errorf("look for pending approvals: %w", err)
	}
	if n > 0 {
		return nil, ErrDuplicate
	}
	now, err := sensitive.Now(ctx, tx, s.clock)
	if err != nil {
		return nil, err
	}
	trace := staff.TraceID
	if trace == "" {
		trace = "approval-" + strconv.FormatInt(now.UnixNano(), 36)
	}
	a, err := st.insert(ctx, Approval{
		TenantID: tenantID, Action: action, TargetID: target, Reason: reason, RequestedBy: staff.UserID,
		RequestedAt: now, ExpiresAt: now.Add(RequestTTL), TraceID: trace,
	})
	if err != nil {
		return nil, err
	}
	detail["action"], detail["reason"] = action, reason
	if err := s.record(ctx, tx, a, staff.UserID, "approval.requested", detail, nil); err != nil {
		return nil, err
	}
	return a, nil
}

// Approve records a second staff member's approval and enqueues the
// action's job in the same transaction. Approving one's own request is
// refused (and the database refuses it too).
func (s *Service) Approve(ctx context.Context, staff Staff, id int64, reason string) (*Approval, error) {
	reason = strings.TrimSpace(reason)
	if reason != "" {
		var err error
		if reason, err = CheckReason(reason); err != nil {
			return nil, err
		}
	}
	return s.decide(ctx, staff, id, StateApproved, reason)
}

// Reject closes a request with a reason; nothing runs.
func (s *Service) Reject(ctx context.Context, staff Staff, id int64, reason string) (*Approval, error) {
	reason, err := CheckReason(reason)
	if err != nil {
		return nil, err
	}
	return s.decide(ctx, staff, id, StateRejected, reason)
}

func (s *Service) decide(ctx context.Context, staff Staff, id int64, state, reason string) (*Approval, error) {
	var out *Approval
	var now time.Time
	err := database.InTx(ctx, s.system, func(tx pgx.Tx) error {
		st := newStore(tx)
		if err := requireStaff(ctx, st, staff.UserID); err != nil {
			return err
		}
		r, err := st.lock(ctx, id)
		if err != nil {
			return err
		}
		if r.State != StatePending {
			return ErrDecided
		}
		if r.RequestedBy == staff.UserID {
			return ErrSelfApproval
		}
		if err := requirePermission(ctx, st, staff.UserID, staffperm.Decide); err != nil {
			return err
		}
		if now, err = sensitive.Now(ctx, tx, s.clock); err != nil {
			return err
		}
		if state == StateApproved && !now.Before(r.ExpiresAt) {
			return ErrExpired
		}
		var dr *string
		if reason != "" {
			dr = &reason
		}
		a, err := st.decide(ctx, id, state, staff.UserID, now, dr)
		if err != nil {
			return err
		}
		detail := map[string]any{"action": a.Action, "target_id": a.TargetID, "requested_by": a.RequestedBy}
		if reason != "" {
			detail["reason"] = reason
		}
		// The decision comes first in the trail; the job's queued event
		// (with the job id) follows it in the same transaction.
		if err := s.record(ctx, tx, a, staff.UserID, "approval."+state, detail, nil); err != nil {
			return err
		}
		if state == StateApproved {
			if a.JobID, err = s.enqueue(ctx, tx, a, now); err != nil {
				return err
			}
			if a.Action == ActionReplay {
				// Used by this decision: the replay runs now, once.
				if err := st.consumeNow(ctx, a.ID, a.TargetID, now); err != nil {
					return fmt.Errorf("consume approval %d: %w", a.ID, err)
				}
				jid := a.TargetID
				a.JobID = &jid
			}
		}
		out = a
		return nil
	})
	if err != nil || out.Action != ActionReplay || state != StateApproved {
		return out, err
	}
	return out, s.replayApproved(ctx, staff, out, now)
}

// replayApproved retries the dead job of an approved replay with a fresh
// time to live; the console records job.replayed with both people.
func (s *Service) replayApproved(ctx context.Context, staff Staff, a *Approval, now time.Time) error {
	if s.replay == nil {
		return fmt.Errorf("approval %d: no replayer configured", a.ID)
	}
	if err := newStore(s.system).refreshExpiry(ctx, a.TenantID, a.TargetID, now.Add(JobTTL)); err != nil {
		return fmt.Errorf("refresh expiry of job %d: %w", a.TargetID, err)
	}
	reason := fmt.Sprintf("approved replay #%d (requested by user %d): %s", a.ID, a.RequestedBy, a.Reason)
	_, err := s.replay.Act(ctx, console.Operator{UserID: staff.UserID, TraceID: staff.TraceID, ApprovalID: a.ID},
		console.ActionRetry, a.TargetID, clipReason(reason))
	return err
}

func clipReason(s string) string {
	r := []rune(s)
	if len(r) <= MaxReason {
		return s
	}
	return string(r[:MaxReason-1]) + "…"
}

// enqueue starts the approved action's job, carrying the approval, its
// requester, a TTL and an idempotency key bound to the approval.
func (s *Service) enqueue(ctx context.Context, tx pgx.Tx, a *Approval, now time.Time) (*int64, error) {
	if a.Action != ActionDisableAccess {
		return nil, nil // replays are run by the caller once the decision is committed
	}
	payload, err := json.Marshal(DisablePayload{TenantID: a.TenantID, UserID: a.TargetID, ApprovalID: a.ID, Scope: "tenant", Reason: a.Reason})
	if err != nil {
		return nil, err
	}
	expires := now.Add(JobTTL)
	requester := a.RequestedBy
	enq, err := s.jobs.Enqueue(ctx, tx, job.EnqueueParams{
		TenantID: a.TenantID, Kind: DisableAccessKind, Payload: payload, TraceID: a.TraceID,
		RequestedBy: &requester, ExpiresAt: &expires, IdempotencyKey: "approval:" + strconv.FormatInt(a.ID, 10),
	})
	if err != nil {
		return nil, fmt.Errorf("enqueue %s for approval %d: %w", DisableAccessKind, a.ID, err)
	}
	if err := newStore(tx).setJob(ctx, a.ID, enq.ID); err != nil {
		return nil, err
	}
	return &enq.ID, nil
}

func (s *Service) record(ctx context.Context, tx pgx.Tx, a *Approval, actor int64, action string, detail map[string]any, jobID *int64) error {
	raw, err := json.Marshal(detail)
	if err != nil {
		return err
	}
	err = s.rec.Append(ctx, tx, audit.Event{
		TenantID: a.TenantID, ActorKind: audit.ActorStaff, ActorID: &actor, Action: action,
		Entity: "approval", EntityID: strconv.FormatInt(a.ID, 10), Detail: raw, TraceID: a.TraceID, JobID: jobID,
	})
	if err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}

func requireStaff(ctx context.Context, st store, userID int64) error {
	role, err := st.staffRole(ctx, userID)
	if err != nil {
		return err
	}
	for _, r := range StaffRoles {
		if role == r {
			return nil
		}
	}
	return ErrNotStaff
}

// Get returns one approval.
func (s *Service) Get(ctx context.Context, id int64) (*Approval, error) {
	return newStore(s.system).get(ctx, id)
}

// Pending lists requests waiting for a decision, oldest first.
func (s *Service) Pending(ctx context.Context, limit int) ([]Approval, error) {
	return newStore(s.system).listPending(ctx, limit)
}

// Recent lists decided requests, newest first.
func (s *Service) Recent(ctx context.Context, limit int) ([]Approval, error) {
	return newStore(s.system).listRecent(ctx, limit)
}

// ForTenant lists a tenant's approvals, newest first.
func (s *Service) ForTenant(ctx context.Context, tenantID int64, limit int) ([]Approval, error) {
	return newStore(s.system).listByTenant(ctx, tenantID, limit)
}
