package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/ptr"
	"github.com/jejakhq/jejak/internal/queries"
)

// store converts between sqlc rows and the console's types; it is the only
// file of the package that sees internal/queries.
type store struct{ q *queries.Queries }

func newStore(db queries.DBTX) store { return store{queries.New(db)} }

// newFilteredStore runs the lists' "(narg IS NULL OR col = narg)" reads
// with plans for their actual filters (see database.FreshPlans).
func newFilteredStore(db database.Querier) store { return store{queries.New(database.FreshPlans(db))} }

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func idPtr(id int64) *int64 {
	if id <= 0 {
		return nil
	}
	return &id
}

func (s store) maxID(ctx context.Context) (int64, error) {
	id, err := s.q.JobAdminMaxID(ctx)
	if err != nil {
		return 0, fmt.Errorf("newest job id: %w", err)
	}
	return id, nil
}

func (s store) list(ctx context.Context, f jobFilter, before, floor int64, limit int) ([]Row, error) {
	rows, err := s.q.JobAdminList(ctx, queries.JobAdminListParams{
		State: strPtr(string(f.State)), Kind: strPtr(f.Kind), TenantID: idPtr(f.TenantID), Queue: strPtr(f.Queue),
		ID: idPtr(f.ID), TraceID: strPtr(f.TraceID), IdempotencyKey: strPtr(f.IdempotencyKey),
		PayloadContains: f.PayloadContains, BeforeID: idPtr(before), FloorID: idPtr(floor), Lim: int32(limit),
		WithOthers: f.State != job.StateRunning, WithRunning: f.State == "" || f.State == job.StateRunning,
	})
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return listRows(rows), nil
}

// listAll is list without filters, on its own prepared statement (s must
// not be a filtered store, whose statements are planned per call).
func (s store) listAll(ctx context.Context, before int64, limit int) ([]Row, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	all, err := s.q.JobAdminListAll(ctx, queries.JobAdminListAllParams{BeforeID: before, Lim: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	rows := make([]queries.JobAdminListRow, len(all))
	for i, r := range all {
		rows[i] = queries.JobAdminListRow(r)
	}
	return listRows(rows), nil
}

func listRows(rows []queries.JobAdminListRow) []Row {
	out := make([]Row, len(rows))
	for i, r := range rows {
		out[i] = Row{
			ID: r.ID, TenantID: r.TenantID, Kind: r.Kind, Queue: r.Queue, Priority: r.Priority,
			State: job.State(r.State), Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts),
			AvailableAt: r.AvailableAt, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt,
			LastError: ptr.Value(r.LastError), Class: job.Class(ptr.Value(r.ErrorClass)), Flagged: r.Flagged,
			TraceID: r.TraceID, WorkerID: ptr.Value(r.WorkerID),
		}
	}
	return out
}

func (s store) tenantList(ctx context.Context, tenantID int64, state job.State, kind string, before, floor int64, limit int) ([]Row, error) {
	rows, err := s.q.JobTenantList(ctx, queries.JobTenantListParams{
		TenantID: tenantID, State: strPtr(string(state)), Kind: strPtr(kind), BeforeID: idPtr(before),
		FloorID: idPtr(floor), Lim: int32(limit),
		WithOthers: state != job.StateRunning, WithRunning: state == "" || state == job.StateRunning,
	})
	if err != nil {
		return nil, fmt.Errorf("list jobs of tenant %d: %w", tenantID, err)
	}
	out := make([]Row, len(rows))
	for i, r := range rows {
		out[i] = Row{
			ID: r.ID, TenantID: tenantID, Kind: r.Kind, Queue: r.Queue, State: job.State(r.State), Attempt: int(r.Attempt),
			MaxAttempts: int(r.MaxAttempts), AvailableAt: r.AvailableAt, CreatedAt: r.CreatedAt,
			FinishedAt: r.FinishedAt, LastError: job.TenantError(ptr.Value(r.LastError)), Class: job.Class(ptr.Value(r.ErrorClass)),
			TraceID: r.TraceID,
		}
	}
	return out, nil
}

// tenantMaxID is the tenant's newest job id (0 when it has none).
func (s store) tenantMaxID(ctx context.Context, tenantID int64) (int64, error) {
	id, err := s.q.JobTenantMaxID(ctx, tenantID)
	if err != nil {
		return 0, fmt.Errorf("newest job of tenant %d: %w", tenantID, err)
	}
	return id, nil
}

// tenantCount counts the tenant's jobs in state (of kind, when not ""),
// reading at most window rows; capped reports that it stopped there.
func (s store) tenantCount(ctx context.Context, tenantID int64, state job.State, kind string, window int) (n int64, capped bool, err error) {
	r, err := s.q.JobTenantCountCapped(ctx, queries.JobTenantCountCappedParams{
		TenantID: tenantID, State: string(state), Kind: strPtr(kind), Win: int32(window)})
	if err != nil {
		return 0, false, fmt.Errorf("count %s jobs of tenant %d: %w", state, tenantID, err)
	}
	return r.N, r.Seen >= int64(window), nil
}

func (s store) deadGroups(ctx context.Context, tenantID int64) ([]DeadGroup, error) {
	rows, err := s.q.JobAdminDeadGroups(ctx, idPtr(tenantID))
	if err != nil {
		return nil, fmt.Errorf("group dead letters: %w", err)
	}
	out := make([]DeadGroup, len(rows))
	for i, r := range rows {
		out[i] = DeadGroup{Kind: r.Kind, Class: job.Class(r.ErrorClass), Count: r.N, Flagged: r.Flagged, LastAt: r.LastAt, Example: r.Example}
	}
	return out, nil
}

func (s store) deadList(ctx context.Context, f deadFilter, before int64, limit int) ([]Row, error) {
	rows, err := s.q.JobAdminDeadList(ctx, queries.JobAdminDeadListParams{
		Kind: strPtr(f.Kind), ErrorClass: strPtr(string(f.Class)), TenantID: idPtr(f.TenantID), Flagged: f.Flagged,
		BeforeID: f.before(before), Lim: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	out := make([]Row, len(rows))
	for i, r := range rows {
		out[i] = Row{
			ID: r.ID, TenantID: r.TenantID, Kind: r.Kind, Queue: r.Queue, State: job.StateDead,
			Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts), FinishedAt: r.FinishedAt,
			LastError: ptr.Value(r.LastError), Class: job.Class(ptr.Value(r.ErrorClass)), Flagged: r.Flagged, TraceID: r.TraceID,
		}
	}
	return out, nil
}

func (s store) deadCount(ctx context.Context, f deadFilter, limit int) (DeadCount, error) {
	r, err := s.q.JobAdminDeadCount(ctx, queries.JobAdminDeadCountParams{
		Kind: strPtr(f.Kind), ErrorClass: strPtr(string(f.Class)), TenantID: idPtr(f.TenantID), Flagged: f.Flagged,
		Lim: int32(limit),
	})
	if err != nil {
		return DeadCount{}, fmt.Errorf("count dead letters: %w", err)
	}
	return DeadCount{N: r.N, MaxID: r.MaxID}, nil
}

func decodeErrors(raw json.RawMessage, into *[]job.AttemptError) error {
	if len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, into)
}

func (s store) get(ctx context.Context, id int64) (*Job, error) {
	r, err := s.q.JobGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, job.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	j := &Job{
		Job: job.Job{
			ID: r.ID, TenantID: r.TenantID, Kind: r.Kind, Queue: r.Queue, Priority: r.Priority,
			Payload: r.Payload, Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts),
			TraceID: r.TraceID, RequestedBy: r.RequestedBy, RequestedAt: r.RequestedAt,
			ExpiresAt: r.ExpiresAt, IdempotencyKey: ptr.Value(r.IdempotencyKey), PayloadHash: r.PayloadHash,
			WorkerID: ptr.Value(r.WorkerID), AvailableAt: r.AvailableAt, CreatedAt: r.CreatedAt,
			AttemptedAt: ptr.Value(r.AttemptedAt), LeaseExpiresAt: ptr.Value(r.LeaseExpiresAt), PayloadVersion: int(r.PayloadVersion),
		},
		State: job.State(r.State), FinishedAt: r.FinishedAt, LastError: ptr.Value(r.LastError),
		Class: job.Class(ptr.Value(r.ErrorClass)), Flagged: r.Flagged,
	}
	if err := decodeErrors(r.Errors, &j.Errors); err != nil {
		return nil, fmt.Errorf("decode attempt history of job %d: %w", id, err)
	}
	return j, nil
}

// locked is a dead letter locked for an operator action.
type locked struct {
	ID, TenantID     int64
	Kind, TraceID    string
	Attempt          int32
	Class, LastError string
	Flagged          bool
}

func (s store) lockDead(ctx context.Context, f deadFilter, id, cursor int64, n int) ([]locked, error) {
	rows, err := s.q.JobAdminDeadLock(ctx, queries.JobAdminDeadLockParams{
		ID: idPtr(id), Kind: strPtr(f.Kind), ErrorClass: strPtr(string(f.Class)), TenantID: idPtr(f.TenantID),
		Flagged: f.Flagged, BeforeID: f.before(cursor), Lim: int32(n),
	})
	if err != nil {
		return nil, fmt.Errorf("lock dead letters: %w", err)
	}
	out := make([]locked, len(rows))
	for i, r := range rows {
		out[i] = locked{ID: r.ID, TenantID: r.TenantID, Kind: r.Kind, TraceID: r.TraceID, Attempt: r.Attempt,
			Class: ptr.Value(r.ErrorClass), LastError: ptr.Value(r.LastError), Flagged: r.Flagged}
	}
	return out, nil
}

// retry and discard address the locked jobs by primary key (tenant, id).
func (s store) retry(ctx context.Context, now *time.Time, operatorID int64, tenantIDs, ids []int64, maxAttempts []int32) ([]int64, error) {
	return s.q.JobAdminRetryMany(ctx, queries.JobAdminRetryManyParams{Now: now, OperatorID: operatorID,
		TenantIds: tenantIDs, Ids: ids, MaxAttempts: maxAttempts})
}

func (s store) discard(ctx context.Context, now *time.Time, tenantIDs, ids []int64) ([]int64, error) {
	return s.q.JobAdminDiscardMany(ctx, queries.JobAdminDiscardManyParams{Now: now, TenantIds: tenantIDs, Ids: ids})
}

// notify wakes idle workers (the engine LISTENs on the jobs channel).
func (s store) notify(ctx context.Context) error { return s.q.JobNotify(ctx) }

func (s store) now(ctx context.Context, clk *time.Time) (time.Time, error) {
	return s.q.JobAdminNow(ctx, clk)
}

// liveCount is one (tenant, kind) group of live jobs.
type liveCount struct {
	TenantID              int64
	Kind                  string
	Pending, Due, Running int64
	Dead, Flagged         int64
}

func (s store) liveCounts(ctx context.Context) ([]liveCount, error) {
	rows, err := s.q.JobAdminLiveCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]liveCount, len(rows))
	for i, r := range rows {
		pending := r.Unfinished - r.Running
		// The scheduled count is the leader's last one: jobs cancelled
		// or claimed since cannot make due negative or above pending.
		due := min(max(pending-r.Scheduled, 0), pending)
		out[i] = liveCount{TenantID: r.TenantID, Kind: r.Kind, Pending: pending, Due: due,
			Running: r.Running, Dead: r.Dead, Flagged: r.Flagged}
	}
	return out, nil
}

// scheduledAt is when the jobs scheduled ahead were last counted (nil:
// never).
func (s store) scheduledAt(ctx context.Context) (*time.Time, error) {
	rows, err := s.q.JobCountsScheduledAt(ctx)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	t := rows[0].UTC()
	return &t, nil
}

// oldestDue is the due time of the oldest job waiting, nil when none is.
func (s store) oldestDue(ctx context.Context, now time.Time) (*time.Time, error) {
	rows, err := s.q.JobAdminOldestDue(ctx, now)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	t := rows[0].UTC()
	return &t, nil
}

// statTotal is one (tenant, kind)'s finished attempts over a window.
type statTotal struct {
	TenantID int64
	Kind     string
	Counts
}

func (s store) statsTotals(ctx context.Context, since time.Time) ([]statTotal, error) {
	rows, err := s.q.JobStatsTotals(ctx, since)
	if err != nil {
		return nil, err
	}
	out := make([]statTotal, len(rows))
	for i, r := range rows {
		out[i] = statTotal{TenantID: r.TenantID, Kind: r.Kind, Counts: Counts{Succeeded: r.Succeeded, Failed: r.Failed, Died: r.Dead}}
	}
	return out, nil
}

func (s store) statsMinutes(ctx context.Context, since time.Time) ([]MinuteStat, error) {
	rows, err := s.q.JobStatsMinutes(ctx, since)
	if err != nil {
		return nil, err
	}
	out := make([]MinuteStat, len(rows))
	for i, r := range rows {
		out[i] = MinuteStat{Minute: r.Minute, Succeeded: r.Succeeded, Failed: r.Failed, Dead: r.Dead}
	}
	return out, nil
}

func (s store) workers(ctx context.Context) ([]job.WorkerInfo, error) {
	rows, err := s.q.JobWorkerList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list job workers: %w", err)
	}
	out := make([]job.WorkerInfo, len(rows))
	for i, r := range rows {
		out[i] = job.WorkerInfo{WorkerID: r.WorkerID, StartedAt: r.StartedAt, LastHeartbeat: r.LastHeartbeat,
			Running: int(r.Running), Capacity: int(r.Capacity), Queues: r.Queues, Leader: r.Leader}
	}
	return out, nil
}
