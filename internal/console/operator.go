package console

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/tenant"
)

// The operator actions on dead letters. Requeueing without a reason and
// without a trail is how repairs go wrong, so each action needs a reason,
// changes only jobs that are still dead, and writes a job.replayed /
// job.discarded event to the job's own tenant's audit trail in the same
// transaction as the state change.

// Action is what an operator does with dead letters.
type Action string

// Operator actions.
const (
	// ActionRetry puts dead letters back to pending, due now. The attempt
	// counter and the errors history are kept (attempt numbers keep
	// counting, so the history stays unambiguous) and max_attempts becomes
	// attempt + the kind's max attempts: a fresh budget of retries. The
	// review flag is cleared: the operator has reviewed it.
	ActionRetry Action = "retry"
	// ActionDiscard cancels dead letters; the rows stay for the record.
	ActionDiscard Action = "discard"
)

// MaxBulk caps one bulk action; a larger set needs more runs (each shows
// its own count first).
const MaxBulk = 10000

// bulkBatch is how many jobs one transaction changes: short transactions
// keep the per-tenant audit head locks brief.
const bulkBatch = 500

// MaxReason bounds an operator's reason.
const MaxReason = 500

// Operator action errors. The reason errors carry their message under the
// form field "reason".
var (
	// ErrReasonRequired: an operator action without a (non-blank) reason.
	ErrReasonRequired = apperr.Invalid("reason", "A reason is required: it is recorded in the tenant's audit trail.")
	// ErrReasonTooLong: a reason over MaxReason characters, or not text.
	ErrReasonTooLong = apperr.Invalidf("reason", "Give a reason of at most %d characters.", MaxReason)
	// ErrNotDead: the job exists but is no longer a dead letter (retried
	// or discarded meanwhile); nothing was changed.
	ErrNotDead = apperr.Conflict("job is not a dead letter")
	// ErrUnknownAction: an action other than retry or discard.
	ErrUnknownAction = apperr.Malformed("Unknown action.")
)

// Operator is the staff member acting, for the audit trail.
type Operator struct {
	UserID int64
	// TraceID is the operator's request; it is kept in the event detail
	// (the event itself carries the job's trace id, so the job's story
	// stays under one trace).
	TraceID string
	// ApprovalID is set only by the two-person approval flow: a dead job
	// of a sensitive kind is retried only with a second staff member's
	// approval.
	ApprovalID int64
	// Confirmed is set when the operator has seen why the job failed
	// permanently and retries it anyway (PermanentFailureError).
	Confirmed bool
}

// PermanentFailureError: a retry of a dead letter whose last failure was
// permanent, asked without Confirmed; nothing changed. Its handler said
// running it again cannot help, so the operator is shown why and asked to
// confirm.
type PermanentFailureError struct {
	JobID int64
	Kind  string
	// LastError is the error the job died with, first line only.
	LastError string
}

func (e *PermanentFailureError) Error() string {
	return fmt.Sprintf("job %d failed permanently: retrying it needs a confirmation", e.JobID)
}

// firstLine is an error message's first line: a stored error may carry a
// stack or a response body below it.
func firstLine(msg string) string {
	if i := strings.IndexAny(msg, "\r\n"); i >= 0 {
		return msg[:i]
	}
	return msg
}

// NeedsApprovalError: a retry of a dead job of a sensitive kind was asked
// without an approval; nothing changed. The caller opens an approval
// request instead.
type NeedsApprovalError struct {
	JobID, TenantID int64
	Kind, TraceID   string
}

func (e *NeedsApprovalError) Error() string {
	return fmt.Sprintf("job %d is a %s job: replaying it needs a second staff member's approval", e.JobID, e.Kind)
}

// sensitive reports whether kind records its lifecycle and needs two
// people to replay.
func (s *Service) sensitive(kind string) bool {
	if s.kinds == nil {
		return false
	}
	o, ok := s.kinds.KindOptions(kind)
	return ok && o.Sensitive
}

// CheckReason trims and validates an operator's reason.
func CheckReason(reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return "", ErrReasonRequired
	}
	if utf8.RuneCountInString(reason) > MaxReason || !utf8.ValidString(reason) || strings.ContainsRune(reason, 0) {
		return "", ErrReasonTooLong
	}
	return reason, nil
}

// ParseAction reads an action name.
func ParseAction(s string) (Action, bool) {
	switch Action(s) {
	case ActionRetry, ActionDiscard:
		return Action(s), true
	}
	return "", false
}

// Act retries or discards one dead letter and returns the job's tenant.
// job.ErrNotFound when no such job exists, ErrNotDead when it is no longer
// dead (nothing changes). A retry of a job that failed permanently needs
// op.Confirmed, else it is a *PermanentFailureError and nothing changes.
func (s *Service) Act(ctx context.Context, op Operator, action Action, id int64, reason string) (tenant.Name, error) {
	if action == ActionRetry && op.ApprovalID == 0 {
		if _, err := CheckReason(reason); err != nil {
			return tenant.Name{}, err
		}
		j, err := newStore(s.system).get(ctx, id)
		if err != nil {
			return tenant.Name{}, fmt.Errorf("%s job %d: %w", action, id, err)
		}
		if j.State == job.StateDead && j.Class == job.ClassPermanent && !op.Confirmed {
			return tenant.Name{}, &PermanentFailureError{JobID: id, Kind: j.Kind, LastError: firstLine(j.LastError)}
		}
		if s.sensitive(j.Kind) && j.State == job.StateDead {
			return tenant.Name{}, &NeedsApprovalError{JobID: id, TenantID: j.TenantID, Kind: j.Kind, TraceID: j.TraceID}
		}
	}
	n, err := s.act(ctx, op, action, deadFilter{}, id, reason, 1)
	if err != nil {
		return tenant.Name{}, err
	}
	j, err := newStore(s.system).get(ctx, id)
	if err != nil {
		return tenant.Name{}, fmt.Errorf("%s job %d: %w", action, id, err)
	}
	if n != 1 {
		return tenant.Name{}, fmt.Errorf("%s job %d: %w", action, id, ErrNotDead)
	}
	names, err := s.tenants.Names(ctx)
	if err != nil {
		return tenant.Name{}, err
	}
	t, ok := names.ByID(j.TenantID)
	if !ok {
		t = tenant.Name{ID: j.TenantID, Slug: names.Slug(j.TenantID)}
	}
	return t, nil
}

// Bulk retries or discards every dead letter matching q with an id up to
// maxID (the newest its preview counted), at most MaxBulk, newest first,
// in transactions of a few hundred jobs, and returns how many changed.
// A bad filter or reason is an apperr invalid error (the reason under
// field "reason"); maxID 0 (the preview counted none) changes nothing.
func (s *Service) Bulk(ctx context.Context, op Operator, action Action, q DeadQuery, maxID int64, reason string) (int, error) {
	names, err := s.tenants.Names(ctx)
	if err != nil {
		return 0, err
	}
	f, errs := q.filter(names)
	if len(errs) > 0 {
		return 0, invalid(errs)
	}
	if _, err := CheckReason(reason); err != nil {
		return 0, err
	}
	if maxID <= 0 {
		return 0, nil
	}
	f.MaxID = maxID
	return s.act(ctx, op, action, f, 0, reason, MaxBulk)
}

func (s *Service) act(ctx context.Context, op Operator, action Action, f deadFilter, id int64, reason string, limit int) (int, error) {
	if _, ok := ParseAction(string(action)); !ok {
		return 0, ErrUnknownAction
	}
	reason, err := CheckReason(reason)
	if err != nil {
		return 0, err
	}
	if op.UserID <= 0 {
		return 0, fmt.Errorf("%w: operator user id must be positive", job.ErrInvalidJob)
	}
	b := batch{op: op, action: action, f: f, id: id, reason: reason, bulk: limit > 1}
	done := 0
	for done < limit {
		b.n = min(bulkBatch, limit-done)
		n, last, err := s.actBatch(ctx, b)
		done += n
		if err != nil {
			return done, err
		}
		if last == 0 {
			break
		}
		b.cursor = last
	}
	if action == ActionRetry && done > 0 {
		// Wake idle workers; polling would find the jobs anyway.
		_ = newStore(s.system).notify(ctx)
	}
	return done, nil
}

// batch is one transaction's share of an operator action.
type batch struct {
	op         Operator
	action     Action
	f          deadFilter
	id, cursor int64
	reason     string
	n          int
	bulk       bool
}

// budget is the retry budget of a kind: its registered max attempts.
func (s *Service) budget(kind string) int {
	if s.kinds != nil {
		if o, ok := s.kinds.KindOptions(kind); ok {
			return o.MaxAttempts
		}
	}
	return job.DefaultMaxAttempts
}

// actBatch locks up to b.n matching dead letters below b.cursor, changes
// them and records one audit event per changed job, in one transaction.
// It returns how many changed and the lowest id locked (0 when none were).
func (s *Service) actBatch(ctx context.Context, b batch) (changed int, last int64, err error) {
	var discarded map[string]int // kind → jobs, set by the committed attempt
	err = database.InTx(ctx, s.system, func(tx pgx.Tx) error {
		discarded = nil
		st := newStore(tx)
		locked, err := st.lockDead(ctx, b.f, b.id, b.cursor, b.n)
		if err != nil || len(locked) == 0 {
			return err
		}
		last = locked[len(locked)-1].ID
		if b.action == ActionRetry && b.op.ApprovalID == 0 {
			// Sensitive kinds are replayed one by one, with approval;
			// a bulk retry passes over them.
			kept := locked[:0]
			for _, r := range locked {
				if !s.sensitive(r.Kind) {
					kept = append(kept, r)
				}
			}
			if locked = kept; len(locked) == 0 {
				return nil
			}
		}
		tenantIDs, ids := make([]int64, len(locked)), make([]int64, len(locked))
		maxes := make([]int32, len(locked))
		byID := make(map[int64]int, len(locked))
		for i, r := range locked {
			tenantIDs[i], ids[i], byID[r.ID] = r.TenantID, r.ID, i
			maxes[i] = r.Attempt + int32(s.budget(r.Kind))
		}
		now := s.clock.Now()
		var done []int64
		if b.action == ActionRetry {
			done, err = st.retry(ctx, now, b.op.UserID, tenantIDs, ids, maxes)
		} else {
			done, err = st.discard(ctx, now, tenantIDs, ids)
		}
		if err != nil {
			return fmt.Errorf("%s dead letters: %w", b.action, err)
		}
		for _, jid := range done {
			i := byID[jid]
			if err := s.record(ctx, tx, b, locked[i], maxes[i]); err != nil {
				return err
			}
		}
		changed = len(done)
		if b.action == ActionDiscard {
			discarded = make(map[string]int)
			for _, jid := range done {
				discarded[locked[byID[jid]].Kind]++
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	// Counted once committed: a discarded dead letter ends cancelled.
	for kind, n := range discarded {
		s.observer.JobsCancelled(kind, n)
	}
	return changed, last, nil
}

// record writes the audit event of one changed job in its tenant's trail.
func (s *Service) record(ctx context.Context, tx pgx.Tx, b batch, r locked, maxAttempts int32) error {
	detail := map[string]any{
		"action": string(b.action), "previous_state": string(job.StateDead), "bulk": b.bulk,
		"error_class": r.Class, "last_error": job.TenantError(r.LastError), "flagged": r.Flagged,
	}
	stage := audit.JobReplayed
	if b.action == ActionRetry {
		detail["max_attempts"] = maxAttempts
	} else {
		stage = audit.JobDiscarded
	}
	if b.op.TraceID != "" {
		detail["operator_trace_id"] = b.op.TraceID
	}
	if b.op.ApprovalID != 0 {
		detail["approval_id"] = b.op.ApprovalID
	}
	raw, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encode operator event detail: %w", err)
	}
	actor := b.op.UserID
	if err := s.rec.RecordJobEvent(ctx, tx, audit.JobEvent{
		TenantID: r.TenantID, JobID: r.ID, Kind: r.Kind, Stage: stage, Attempt: int(r.Attempt),
		TraceID: r.TraceID, ActorKind: audit.ActorStaff, ActorID: &actor, Reason: b.reason, Detail: raw,
	}); err != nil {
		return fmt.Errorf("audit %s of job %d: %w", b.action, r.ID, err)
	}
	// Other systems hear of the repair in the same transaction.
	event := "job.dead_letter.retried"
	if b.action != ActionRetry {
		event = "job.dead_letter.discarded"
	}
	var by *int64 // the staff member's; none from the command line
	if actor > 0 {
		by = &actor
	}
	if _, err := outbox.NewWriter(s.clock).Publish(ctx, tx, r.TenantID, outbox.Message{Type: event, AggregateType: "job",
		AggregateID: strconv.FormatInt(r.ID, 10), TraceID: r.TraceID, RequestedBy: by,
		Payload: map[string]any{"job_id": r.ID, "kind": r.Kind, "reason": b.reason, "operator_user_id": actor}}); err != nil {
		return fmt.Errorf("publish %s of job %d: %w", event, r.ID, err)
	}
	return nil
}
