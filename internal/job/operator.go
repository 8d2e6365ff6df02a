package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/queries"
)

// This file holds the operator actions on dead letters (SPEC D5, S7, seed
// 003: "manual requeue without justification and operator trail" is a
// failure mode). Each action needs a reason, changes only jobs that are
// still dead, and writes a job.replayed / job.discarded event to the job's
// own tenant's audit trail in the same transaction as the state change.

// OperatorAction is what an operator does with dead letters.
type OperatorAction string

// Operator actions.
const (
	// ActionRetry puts dead letters back to pending, due now. The attempt
	// counter and the errors history are kept (attempt numbers keep
	// counting, so the history stays unambiguous) and max_attempts becomes
	// attempt + the kind's max attempts: a fresh budget of retries. The
	// review flag is cleared: the operator has reviewed it.
	ActionRetry OperatorAction = "retry"
	// ActionDiscard cancels dead letters; the rows stay for the record.
	ActionDiscard OperatorAction = "discard"
)

// MaxBulk caps one bulk action; a larger set needs more runs (each shows
// its own count first).
const MaxBulk = 10000

// bulkBatch is how many jobs one transaction changes: short transactions
// keep the per-tenant audit head locks brief.
const bulkBatch = 500

// MaxReason bounds an operator's reason.
const MaxReason = 500

// Operator action errors.
var (
	// ErrReasonRequired: an operator action without a (non-blank) reason.
	ErrReasonRequired = errors.New("a reason is required")
	// ErrNotDead: the job exists but is no longer a dead letter (retried
	// or discarded meanwhile); nothing was changed.
	ErrNotDead = errors.New("job is not a dead letter")
)

// Operator is the staff member acting, for the audit trail.
type Operator struct {
	UserID int64
	// TraceID is the operator's request; it is kept in the event detail
	// (the event itself carries the job's trace id, so the job's story
	// stays under one trace).
	TraceID string
}

// CheckReason trims and validates an operator's reason.
func CheckReason(reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return "", ErrReasonRequired
	}
	if utf8.RuneCountInString(reason) > MaxReason || !utf8.ValidString(reason) || strings.ContainsRune(reason, 0) {
		return "", fmt.Errorf("%w: at most %d characters of text", ErrReasonRequired, MaxReason)
	}
	return reason, nil
}

// ParseAction reads an action name.
func ParseAction(s string) (OperatorAction, bool) {
	switch OperatorAction(s) {
	case ActionRetry, ActionDiscard:
		return OperatorAction(s), true
	}
	return "", false
}

// ActOnDead retries or discards one dead letter. ErrNotFound when no such
// job exists, ErrNotDead when it is no longer dead (nothing changes).
func (e *Engine) ActOnDead(ctx context.Context, op Operator, action OperatorAction, id int64, reason string) error {
	n, err := e.act(ctx, op, action, DeadFilter{}, id, reason, 1)
	if err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	if _, err := storeGet(ctx, e.pool, id); err != nil {
		return fmt.Errorf("%s job %d: %w", action, id, err)
	}
	return fmt.Errorf("%s job %d: %w", action, id, ErrNotDead)
}

// ActOnDeadMatching retries or discards every dead letter matching f, at
// most MaxBulk, newest first, in transactions of a few hundred jobs. Set
// f.MaxID (from CountDead) so the action touches only what its preview
// counted. It returns how many jobs changed.
func (e *Engine) ActOnDeadMatching(ctx context.Context, op Operator, action OperatorAction, f DeadFilter, reason string) (int, error) {
	return e.act(ctx, op, action, f, 0, reason, MaxBulk)
}

func (e *Engine) act(ctx context.Context, op Operator, action OperatorAction, f DeadFilter, id int64, reason string, limit int) (int, error) {
	if _, ok := ParseAction(string(action)); !ok {
		return 0, fmt.Errorf("%w: unknown operator action %q", ErrInvalidJob, action)
	}
	reason, err := CheckReason(reason)
	if err != nil {
		return 0, err
	}
	if op.UserID <= 0 {
		return 0, fmt.Errorf("%w: operator user id must be positive", ErrInvalidJob)
	}
	rec := audit.NewRecorder(e.clock)
	done := 0
	cursor := int64(0)
	for done < limit {
		n, last, err := e.actBatch(ctx, rec, op, action, f, id, cursor, reason, min(bulkBatch, limit-done), limit > 1)
		done += n
		if err != nil {
			return done, err
		}
		if last == 0 {
			break
		}
		cursor = last
	}
	if action == ActionRetry && done > 0 {
		// Wake idle workers; polling would find the jobs anyway.
		_ = storeNotify(ctx, e.pool)
	}
	return done, nil
}

// actBatch locks up to n matching dead letters below cursor, changes them
// and records one audit event per changed job, in one transaction. It
// returns how many changed and the lowest id locked (0 when none were).
func (e *Engine) actBatch(ctx context.Context, rec *audit.Recorder, op Operator, action OperatorAction,
	f DeadFilter, id, cursor int64, reason string, n int, bulk bool) (changed int, last int64, err error) {
	err = database.InTx(ctx, e.pool, func(tx pgx.Tx) error {
		q := queries.New(tx)
		locked, err := q.JobAdminDeadLock(ctx, queries.JobAdminDeadLockParams{
			ID: idPtr(id), Kind: strPtr(f.Kind), ErrorClass: strPtr(string(f.Class)), TenantID: idPtr(f.TenantID),
			Flagged: f.Flagged, BeforeID: f.before(cursor), Lim: int32(n),
		})
		if err != nil {
			return fmt.Errorf("lock dead letters: %w", err)
		}
		if len(locked) == 0 {
			return nil
		}
		last = locked[len(locked)-1].ID
		ids := make([]int64, len(locked))
		maxes := make([]int32, len(locked))
		byID := make(map[int64]queries.JobAdminDeadLockRow, len(locked))
		maxByID := make(map[int64]int32, len(locked))
		for i, r := range locked {
			ids[i] = r.ID
			budget := DefaultMaxAttempts
			if o, ok := e.KindOptions(r.Kind); ok {
				budget = o.MaxAttempts
			}
			maxes[i] = r.Attempt + int32(budget)
			maxByID[r.ID] = maxes[i]
			byID[r.ID] = r
		}
		now := e.clock.Now()
		var done []int64
		stage := audit.JobReplayed
		if action == ActionRetry {
			done, err = q.JobAdminRetryMany(ctx, queries.JobAdminRetryManyParams{Now: now, Ids: ids, MaxAttempts: maxes})
		} else {
			stage = audit.JobDiscarded
			done, err = q.JobAdminDiscardMany(ctx, queries.JobAdminDiscardManyParams{Now: now, Ids: ids})
		}
		if err != nil {
			return fmt.Errorf("%s dead letters: %w", action, err)
		}
		heads := make([]int64, len(done))
		for i, jid := range done {
			heads[i] = byID[jid].TenantID
		}
		if err := rec.LockHeads(ctx, tx, heads); err != nil {
			return err
		}
		for _, jid := range done {
			r := byID[jid]
			detail := map[string]any{
				"action": string(action), "previous_state": string(StateDead), "bulk": bulk,
				"error_class": deref(r.ErrorClass), "last_error": truncateText(deref(r.LastError), 300),
				"flagged": r.Flagged,
			}
			if action == ActionRetry {
				detail["max_attempts"] = maxByID[jid]
			}
			if op.TraceID != "" {
				detail["operator_trace_id"] = op.TraceID
			}
			raw, err := json.Marshal(detail)
			if err != nil {
				return fmt.Errorf("encode operator event detail: %w", err)
			}
			actor := op.UserID
			if _, err := rec.RecordJobEvent(ctx, tx, audit.JobEvent{
				TenantID: r.TenantID, JobID: jid, Kind: r.Kind, Stage: stage, Attempt: int(r.Attempt),
				TraceID: r.TraceID, ActorKind: audit.ActorStaff, ActorID: &actor, Reason: reason, Detail: raw,
			}); err != nil {
				return fmt.Errorf("audit %s of job %d: %w", action, jid, err)
			}
		}
		changed = len(done)
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return changed, last, nil
}

func truncateText(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
