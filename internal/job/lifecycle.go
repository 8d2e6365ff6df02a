package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
)

// Sensitive kinds (KindOptions.Sensitive) leave every stage of
// their life in the tenant's audit trail: queued (in the enqueuing
// transaction), claimed and started, then succeeded, or failed followed by
// retried or dead-lettered, or rejected (policy: expired, unauthorised)
// followed by dead-lettered. A stage that changes the job's state is
// written in the same transaction as that change, so the trail and the job
// never disagree. Ordinary kinds keep their lifecycle in the job row only,
// which keeps the hot path free of audit writes.

// ErrSensitiveNeedsTx: a sensitive kind must be enqueued inside a
// transaction so its "queued" event commits with the job.
var ErrSensitiveNeedsTx = errors.New("sensitive job kinds must be enqueued inside a pgx.Tx")

func (e *Engine) sensitive(kind string) bool {
	k, ok := e.handler(kind)
	return ok && k.opts.Sensitive
}

func (e *Engine) jobEvent(j *Job, stage audit.JobStage, detail map[string]any) audit.JobEvent {
	ev := audit.JobEvent{TenantID: j.TenantID, JobID: j.ID, Kind: j.Kind, Stage: stage, WorkerID: j.WorkerID,
		Attempt: j.Attempt, TraceID: j.TraceID}
	if len(detail) > 0 {
		ev.Detail, _ = json.Marshal(detail) // strings only: cannot fail
	}
	return ev
}

// checkAuditable refuses, before anything is written, to enqueue a
// sensitive kind outside a transaction.
func (e *Engine) checkAuditable(q Querier, ps []EnqueueParams) error {
	if _, ok := q.(pgx.Tx); ok {
		return nil
	}
	for _, p := range ps {
		if e.sensitive(p.Kind) {
			return ErrSensitiveNeedsTx
		}
	}
	return nil
}

// recordQueued writes the queued event of each sensitive job just enqueued
// (existing idempotent duplicates were queued before and are skipped).
func (e *Engine) recordQueued(ctx context.Context, q Querier, ps []EnqueueParams, ids []int64, existing []bool) error {
	var rec *audit.Recorder // only when a sensitive job is among ps: the common enqueue pays nothing
	for i, p := range ps {
		if existing[i] || !e.sensitive(p.Kind) {
			continue
		}
		if rec == nil {
			rec = audit.NewRecorder(e.clock)
		}
		tx := q.(pgx.Tx) // checkAuditable ran first
		// The trace id may have been generated at insert: read it back.
		var trace string
		if err := tx.QueryRow(ctx, "SELECT trace_id FROM jobs WHERE tenant_id = $1 AND id = $2", p.TenantID, ids[i]).Scan(&trace); err != nil {
			return fmt.Errorf("read trace of job %d: %w", ids[i], err)
		}
		j := &Job{ID: ids[i], TenantID: p.TenantID, Kind: p.Kind, TraceID: trace}
		ev := e.jobEvent(j, audit.JobQueued, nil)
		ev.ActorID = p.RequestedBy
		if p.RequestedBy != nil {
			ev.ActorKind = audit.ActorUser
		}
		if err := rec.RecordJobEvent(ctx, tx, ev); err != nil {
			return fmt.Errorf("audit job %d queued: %w", ids[i], err)
		}
	}
	return nil
}

// recordStarted writes claimed and started for a sensitive job about to
// run. The claim itself was a batch statement; these follow it at once.
func (e *Engine) recordStarted(ctx context.Context, j *Job) error {
	rec := audit.NewRecorder(e.clock)
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		for _, st := range []audit.JobStage{audit.JobClaimed, audit.JobStarted} {
			if err := rec.RecordJobEvent(ctx, tx, e.jobEvent(j, st, nil)); err != nil {
				return err
			}
		}
		return nil
	})
}

// completeAudited marks a sensitive or replayed job succeeded and records
// it, in one transaction (such jobs skip the batched completer).
func (e *Engine) completeAudited(ctx context.Context, j *Job) error {
	rec := audit.NewRecorder(e.clock)
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		ok, err := storeComplete(ctx, tx, e.clock.Now(), j.WorkerID, claimToken{j.TenantID, j.ID, j.Attempt})
		if err != nil {
			return err
		}
		if !ok {
			return ErrNotHeld
		}
		if e.sensitive(j.Kind) {
			if err := rec.RecordJobEvent(ctx, tx, e.jobEvent(j, audit.JobSucceeded, nil)); err != nil {
				return err
			}
		}
		return e.recordReplayOutcome(ctx, tx, rec, j, StateSucceeded, nil)
	})
}

// audited reports whether finishing j writes to the tenant's trail: every
// stage of a sensitive kind, the outcome of an operator's replay.
func (e *Engine) audited(j *Job) bool { return j.ReplayedBy != nil || e.sensitive(j.Kind) }

// failJob records a failed attempt of a job this engine ran: the state
// change, the rollup, and for sensitive kinds and replays the audit
// events, together.
func (e *Engine) failJob(ctx context.Context, j *Job, cause error) (State, error) {
	if !e.audited(j) {
		return e.fail(ctx, j.WorkerID, claimToken{j.TenantID, j.ID, j.Attempt}, cause)
	}
	rec := audit.NewRecorder(e.clock)
	var st State
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) (err error) {
		if st, err = e.failIn(ctx, tx, j.WorkerID, claimToken{j.TenantID, j.ID, j.Attempt}, cause); err != nil {
			return err
		}
		if e.sensitive(j.Kind) {
			if err := e.recordFailStages(ctx, tx, rec, j, cause, st); err != nil {
				return err
			}
		}
		return e.recordReplayOutcome(ctx, tx, rec, j, st, cause)
	})
	return st, err
}

// recordFailStages writes a sensitive job's failed (or rejected) stage and
// then retried or dead_lettered.
func (e *Engine) recordFailStages(ctx context.Context, tx pgx.Tx, rec *audit.Recorder, j *Job, cause error, st State) error {
	first, detail := audit.JobFailed, map[string]any{"class": string(ClassOf(cause)), "error": TenantError(cause.Error())}
	if ClassOf(cause) == ClassPolicy {
		first = audit.JobRejected
	}
	second := audit.JobRetried
	if st == StateDead {
		second = audit.JobDeadLettered
	}
	for _, stage := range []audit.JobStage{first, second} {
		ev := e.jobEvent(j, stage, detail)
		ev.Reason = ReasonOf(cause)
		if err := rec.RecordJobEvent(ctx, tx, ev); err != nil {
			return err
		}
	}
	return nil
}

// recordReplayOutcome tells the tenant how an operator's replay of j ended
// once it has: succeeded, or dead again with the error the tenant may see.
// A failure that will be retried is not an outcome yet. The event carries
// the job's trace, the trace of the operator's job.replayed event.
func (e *Engine) recordReplayOutcome(ctx context.Context, tx pgx.Tx, rec *audit.Recorder, j *Job, st State, cause error) error {
	if j.ReplayedBy == nil || (st != StateSucceeded && st != StateDead) {
		return nil
	}
	stage := audit.JobReplaySucceeded
	detail := map[string]any{"replayed_by": strconv.FormatInt(*j.ReplayedBy, 10)}
	var reason string
	if st == StateDead {
		stage, reason = audit.JobReplayFailed, TenantError(cause.Error())
		detail["class"], detail["error"] = string(ClassOf(cause)), reason
	}
	ev := e.jobEvent(j, stage, detail)
	ev.Reason = reason
	if err := rec.RecordJobEvent(ctx, tx, ev); err != nil {
		return fmt.Errorf("audit replay outcome of job %d: %w", j.ID, err)
	}
	return nil
}

// recordRescued writes what a rescue did to j: rescued (and dead_lettered
// on its last attempt) for a sensitive kind, and for an operator's replay
// that died with its lost lease, the replay's outcome.
func (e *Engine) recordRescued(ctx context.Context, tx pgx.Tx, rec *audit.Recorder, j *Job) error {
	dead := j.Attempt >= j.MaxAttempts
	if e.sensitive(j.Kind) {
		stages := []audit.JobStage{audit.JobRescued}
		if dead {
			stages = append(stages, audit.JobDeadLettered)
		}
		for _, st := range stages {
			ev := e.jobEvent(j, st, map[string]any{"lost_worker": j.WorkerID})
			ev.Reason = "lease_expired"
			if err := rec.RecordJobEvent(ctx, tx, ev); err != nil {
				return err
			}
		}
	}
	if !dead {
		return nil
	}
	// The words of JobRescueExpired's last_error.
	cause := fmt.Errorf("lease expired: worker %s stopped heartbeating", j.WorkerID)
	return e.recordReplayOutcome(ctx, tx, rec, j, StateDead, cause)
}

func (e *Engine) sensitiveKinds() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var out []string
	for k, v := range e.kinds {
		if v.opts.Sensitive {
			out = append(out, k)
		}
	}
	return out
}

// rescueAudited is rescue when sensitive kinds are registered: their
// expired jobs (and replayed ones) are locked first, rescued with
// everything else in the same transaction, and each records rescued (and
// dead_lettered when that was its last attempt) in its tenant's trail, a
// replay that died its outcome (recordRescued).
func (e *Engine) rescueAudited(ctx context.Context, kinds []string) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		lost, err := storeExpiredSensitive(ctx, tx, e.clock.Now(), kinds)
		if err != nil {
			return err
		}
		retried, dead, err := storeRescue(ctx, tx, e.clock.Now())
		if err != nil {
			return err
		}
		e.observeCancelledDependents(ctx, tx, dead)
		n = retried + len(dead)
		rec := audit.NewRecorder(e.clock)
		for _, j := range lost {
			if err := e.recordRescued(ctx, tx, rec, j); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("rescue expired jobs: %w", err)
	}
	if n > 0 {
		e.log.Warn("rescued jobs with expired leases", "jobs", n)
		_ = storeNotify(ctx, e.pool)
	}
	return n, nil
}
