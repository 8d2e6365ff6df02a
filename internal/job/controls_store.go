package job

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/ptr"
	"github.com/jejakhq/jejak/internal/queries"
)

// The sqlc calls behind delays, payload versions, dependencies and pauses.

func storeDelay(ctx context.Context, db Querier, tenantID, id int64, workerID string, attempt int, at time.Time) error {
	_, err := queries.New(db).JobDelay(ctx, queries.JobDelayParams{TenantID: tenantID, ID: id, WorkerID: workerID,
		Attempt: int32(attempt), AvailableAt: at})
	return err
}

func storeLockForDependents(ctx context.Context, db Querier, id, tenantID int64) (State, error) {
	st, err := queries.New(db).JobLockForDependents(ctx, queries.JobLockForDependentsParams{ID: id, TenantID: tenantID})
	return State(st), err
}

func storeStampControls(ctx context.Context, db Querier, tenantID, id int64, version int, dependsOn *int64, wait bool) error {
	return queries.New(db).JobStampControls(ctx, queries.JobStampControlsParams{TenantID: tenantID, ID: id, PayloadVersion: int32(version),
		DependsOn: dependsOn, Wait: wait})
}

func storeCancelPending(ctx context.Context, db Querier, tenantID, id int64, reason string, now *time.Time) error {
	return queries.New(db).JobCancelPending(ctx, queries.JobCancelPendingParams{TenantID: tenantID, ID: id, Reason: &reason, Now: now})
}

// storeCancelledDependents counts, by kind, the dependents cancelled with
// the jobs ids when those ended.
func storeCancelledDependents(ctx context.Context, db Querier, ids []int64) (map[string]int, error) {
	rows, err := queries.New(db).JobCancelledDependents(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Kind] = int(r.N)
	}
	return out, nil
}

func storeDependencies(ctx context.Context, db Querier, tenantID, id int64) (*int64, []Link, error) {
	q := queries.New(db)
	r, err := q.JobDependsOn(ctx, queries.JobDependsOnParams{TenantID: tenantID, ID: id})
	if err != nil {
		return nil, nil, err
	}
	rows, err := q.JobDependents(ctx, queries.JobDependentsParams{TenantID: tenantID, DependsOn: &id})
	if err != nil {
		return nil, nil, err
	}
	out := make([]Link, len(rows))
	for i, d := range rows {
		out[i] = Link{ID: d.ID, Kind: d.Kind, State: State(d.State)}
	}
	return r.DependsOn, out, nil
}

func storePauses(ctx context.Context, db Querier) ([]Pause, error) {
	rows, err := queries.New(db).PauseList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Pause, len(rows))
	for i, r := range rows {
		out[i] = Pause{Scope: r.Scope, Name: r.Name, Reason: r.Reason, PausedBy: r.PausedBy, Auto: r.Auto, PausedAt: r.PausedAt}
	}
	return out, nil
}

// storePauseInsert reports false when the kind or queue is paused already.
func storePauseInsert(ctx context.Context, db Querier, p Pause) (bool, error) {
	_, err := queries.New(db).PauseInsert(ctx, queries.PauseInsertParams{Scope: p.Scope, Name: p.Name, Reason: p.Reason,
		PausedBy: p.PausedBy, Auto: p.Auto, PausedAt: p.PausedAt})
	return noRowsFalse(err)
}

// storePauseDelete reports false when it was not paused.
func storePauseDelete(ctx context.Context, db Querier, scope, name string) (bool, error) {
	_, err := queries.New(db).PauseDelete(ctx, queries.PauseDeleteParams{Scope: scope, Name: name})
	return noRowsFalse(err)
}

func storePauseLog(ctx context.Context, db Querier, p Pause, action string, at time.Time, detail json.RawMessage) error {
	return queries.New(db).PauseLogInsert(ctx, queries.PauseLogInsertParams{Scope: p.Scope, Name: p.Name, Action: action,
		Reason: p.Reason, ActorID: p.PausedBy, Auto: p.Auto, At: at, Detail: detail})
}

// kindRate is a kind's attempts over a window.
type kindRate struct {
	Kind              string
	Succeeded, Failed int64
}

func storeKindRates(ctx context.Context, db Querier, since time.Time) ([]kindRate, error) {
	rows, err := queries.New(db).KindFailureRates(ctx, since)
	if err != nil {
		return nil, err
	}
	out := make([]kindRate, len(rows))
	for i, r := range rows {
		out[i] = kindRate{Kind: r.Kind, Succeeded: r.Succeeded, Failed: r.Failed}
	}
	return out, nil
}

func noRowsFalse(err error) (bool, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func storeExpiredSensitive(ctx context.Context, db Querier, now *time.Time, kinds []string) ([]*Job, error) {
	rows, err := queries.New(db).JobExpiredSensitive(ctx, queries.JobExpiredSensitiveParams{Now: now, Kinds: kinds})
	if err != nil {
		return nil, err
	}
	out := make([]*Job, len(rows))
	for i, r := range rows {
		out[i] = &Job{ID: r.ID, TenantID: r.TenantID, Kind: r.Kind, TraceID: r.TraceID, Attempt: int(r.Attempt),
			MaxAttempts: int(r.MaxAttempts), WorkerID: ptr.Value(r.WorkerID), ReplayedBy: r.ReplayedBy}
	}
	return out, nil
}

func storePauseLogRecent(ctx context.Context, db Querier, limit int) ([]PauseEvent, error) {
	rows, err := queries.New(db).PauseLogRecent(ctx, int32(limit))
	if err != nil {
		return nil, err
	}
	out := make([]PauseEvent, len(rows))
	for i, r := range rows {
		out[i] = PauseEvent{Scope: r.Scope, Name: r.Name, Action: r.Action, Reason: r.Reason, ActorID: r.ActorID, Auto: r.Auto, At: r.At}
	}
	return out, nil
}
