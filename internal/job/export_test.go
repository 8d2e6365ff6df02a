package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/ptr"
	"github.com/jejakhq/jejak/internal/queries"
)

// This file gives the package's external tests (package job_test) reach
// into the engine's internals; it is compiled only with the tests.

// Record is the full stored state of a job, as the tests inspect it.
type Record struct {
	Job
	State      State
	FinishedAt *time.Time
	LastError  string
	Class      Class
	Flagged    bool
	Errors     []AttemptError
}

// Get returns a job's full record, or ErrNotFound.
func (e *Engine) Get(ctx context.Context, id int64) (*Record, error) {
	r, err := queries.New(e.pool).JobGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	rec := &Record{
		Job: Job{
			ID: r.ID, TenantID: r.TenantID, Kind: r.Kind, Queue: r.Queue, Priority: r.Priority,
			Payload: r.Payload, Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts),
			TraceID: r.TraceID, RequestedBy: r.RequestedBy, RequestedAt: r.RequestedAt,
			ExpiresAt: r.ExpiresAt, IdempotencyKey: ptr.Value(r.IdempotencyKey), PayloadHash: r.PayloadHash,
			WorkerID: ptr.Value(r.WorkerID), AvailableAt: r.AvailableAt, CreatedAt: r.CreatedAt,
			AttemptedAt: ptr.Value(r.AttemptedAt), LeaseExpiresAt: ptr.Value(r.LeaseExpiresAt),
			payloadIntact: r.PayloadIntact,
		},
		State: State(r.State), FinishedAt: r.FinishedAt, LastError: ptr.Value(r.LastError),
		Class: Class(ptr.Value(r.ErrorClass)), Flagged: r.Flagged,
	}
	if len(r.Errors) > 0 {
		if err := json.Unmarshal(r.Errors, &rec.Errors); err != nil {
			return nil, fmt.Errorf("decode attempt history of job %d: %w", id, err)
		}
	}
	return rec, nil
}

// DeadLetter is a dead job as the tests list them.
type DeadLetter struct {
	ID        int64
	TenantID  int64
	Kind      string
	Attempts  int
	LastError string
	Class     Class
	Flagged   bool
}

// DeadLetterFilter narrows DeadLetters.
type DeadLetterFilter struct {
	TenantID int64 // 0 = all tenants
	Limit    int   // 0 = 100
}

// DeadLetters lists dead jobs, oldest first.
func (e *Engine) DeadLetters(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error) {
	var tenant *int64
	if f.TenantID > 0 {
		tenant = &f.TenantID
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	rows, err := queries.New(e.pool).JobListDead(ctx, queries.JobListDeadParams{TenantID: tenant, MaxRows: int32(f.Limit)})
	if err != nil {
		return nil, err
	}
	out := make([]DeadLetter, len(rows))
	for i, r := range rows {
		out[i] = DeadLetter{ID: r.ID, TenantID: r.TenantID, Kind: r.Kind, Attempts: int(r.Attempt),
			LastError: ptr.Value(r.LastError), Class: Class(ptr.Value(r.ErrorClass)), Flagged: r.Flagged}
	}
	return out, nil
}

// Workers lists the engines' heartbeat rows (all replicas).
func (e *Engine) Workers(ctx context.Context) ([]WorkerInfo, error) {
	rows, err := queries.New(e.pool).JobWorkerList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]WorkerInfo, len(rows))
	for i, r := range rows {
		out[i] = WorkerInfo{WorkerID: r.WorkerID, Running: int(r.Running), Capacity: int(r.Capacity), Leader: r.Leader}
	}
	return out, nil
}

// RescueExpired runs the leader's rescue of expired leases once.
func (e *Engine) RescueExpired(ctx context.Context) (int, error) { return e.rescue(ctx, e.pool) }

// Prune runs the leader's retention prune once.
func (e *Engine) Prune(ctx context.Context) (int64, error) { return e.prune(ctx, e.pool) }

// StatsPrune runs the leader's prune of the per-minute rollup once.
func StatsPrune(ctx context.Context, db Querier, now *time.Time, olderThan time.Duration) (int64, error) {
	return storeStatsPrune(ctx, db, now, olderThan)
}

// FoldCounts runs the maintenance leader's fold of the count deltas.
func (e *Engine) FoldCounts(ctx context.Context) (int64, error) { return storeCountsFold(ctx, e.pool) }

// ClaimSQL is the fair claim statement, for the plan test.
var ClaimSQL = claimSQL

// ClaimAnyKindSQL is the fair claim run when no kind is paused.
var ClaimAnyKindSQL = claimAnyKindSQL

// ClaimSmallSQL is the idle queue's claim statement, for the plan test.
var ClaimSmallSQL = claimSmallSQL

// DelayJob gives a held job back for later, as a handler's Delay does.
func (e *Engine) DelayJob(ctx context.Context, j *Job, after time.Duration, reason string) error {
	return e.delayJob(ctx, j, after, reason)
}

// SetWarm overrides how long the producer stays awake after work and how
// often it claims meanwhile (database.WarmFor, WarmPoll); a negative
// warmFor marks it asleep as soon as nothing is due. Call before Start.
func (e *Engine) SetWarm(warmFor, warmPoll time.Duration) { e.warmFor, e.warmPoll = warmFor, warmPoll }

// Idle reports whether the running producer waits for a wake-up for its
// whole poll interval (asleep and settled, no shorter timer armed) with
// no wake-up on its way to it: from then on it claims only when woken.
func (e *Engine) Idle() bool {
	e.runMu.Lock()
	r := e.run
	e.runMu.Unlock()
	if r == nil {
		return false
	}
	r.wakeMu.Lock()
	defer r.wakeMu.Unlock()
	return time.Duration(r.parked.Load()) == e.cfg.PollInterval && len(r.wake) == 0 && r.taken == r.sent
}

// ClaimDrained is Claim, also reporting whether the producer would wait
// before claiming again (the queue drained, or its tenants at their cap).
func (e *Engine) ClaimDrained(ctx context.Context, workerID string, n int) ([]*Job, bool, error) {
	return e.claim(ctx, workerID, n)
}

// SetSlot gives the engine a place among its queues' workers, as its
// heartbeat would.
func (e *Engine) SetSlot(members, rank int) { e.setSlot(slot{members: members, rank: rank}) }
