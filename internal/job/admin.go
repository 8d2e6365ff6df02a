package job

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/keyset"
	"github.com/jejakhq/jejak/internal/queries"
)

// This file holds the staff dashboard's cross-tenant reads (SPEC D4, D5):
// the filtered job list, dead letters grouped and listed, jobs of one
// trace. They run on the system pool (jejak_system). Like store.go it
// converts sqlc rows into domain types.

// filtered runs the staff lists' "(narg IS NULL OR col = narg)" reads with
// plans for their actual filters (see database.FreshPlans).
func filtered(db Querier) *queries.Queries { return queries.New(database.FreshPlans(db)) }

// AdminFilter narrows the staff job list; zero fields match all.
type AdminFilter struct {
	State          State
	Kind           string
	Queue          string
	TenantID       int64
	ID             int64
	TraceID        string
	IdempotencyKey string
	// PayloadContains is a JSON object the payload must contain (jsonb @>).
	PayloadContains json.RawMessage
}

// ListRow is one job in a list: the staff pages show all of it, the
// tenant's read-only jobs page a subset (no payload, no worker internals).
type ListRow struct {
	ID          int64
	TenantID    int64
	Kind        string
	Queue       string
	Priority    int16
	State       State
	Attempt     int
	MaxAttempts int
	AvailableAt time.Time
	CreatedAt   time.Time
	FinishedAt  *time.Time
	LastError   string
	Class       Class
	Flagged     bool
	TraceID     string
	WorkerID    string
}

// ListPage is one keyset page of jobs, newest first; Next is the id to
// pass as before for the next page, 0 on the last page.
type ListPage = keyset.Page[ListRow]

func rowID(r *ListRow) int64 { return r.ID }

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

// ListJobs returns one page of jobs matching f across tenants, newest
// first, keyset on id (before = 0 for the first page).
func ListJobs(ctx context.Context, db Querier, f AdminFilter, before int64, limit int) (ListPage, error) {
	limit = keyset.Limit(limit)
	rows, err := filtered(db).JobAdminList(ctx, queries.JobAdminListParams{
		State: strPtr(string(f.State)), Kind: strPtr(f.Kind), TenantID: idPtr(f.TenantID), Queue: strPtr(f.Queue),
		ID: idPtr(f.ID), TraceID: strPtr(f.TraceID), IdempotencyKey: strPtr(f.IdempotencyKey),
		PayloadContains: f.PayloadContains, BeforeID: idPtr(before), Lim: int32(limit + 1),
	})
	if err != nil {
		return ListPage{}, fmt.Errorf("list jobs: %w", err)
	}
	p := ListPage{Rows: make([]ListRow, 0, len(rows))}
	for _, r := range rows {
		p.Rows = append(p.Rows, ListRow{
			ID: r.ID, TenantID: r.TenantID, Kind: r.Kind, Queue: r.Queue, Priority: r.Priority,
			State: State(r.State), Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts),
			AvailableAt: r.AvailableAt, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt,
			LastError: deref(r.LastError), Class: Class(deref(r.ErrorClass)), Flagged: r.Flagged,
			TraceID: r.TraceID, WorkerID: deref(r.WorkerID),
		})
	}
	return keyset.Cut(p.Rows, limit, rowID), nil
}

// DeadFilter selects dead letters for the list and for bulk actions; zero
// fields match all.
type DeadFilter struct {
	Kind     string
	Class    Class
	TenantID int64
	Flagged  *bool
	// MaxID, when set, limits a bulk action to the jobs that existed when
	// its preview was counted, so the count shown is the most it affects.
	MaxID int64
}

// DeadGroup is the dead letters of one kind and failure class.
type DeadGroup struct {
	Kind    string
	Class   Class
	Count   int64
	Flagged int64
	LastAt  time.Time
	Example string // the newest error of the group
}

// DeadGroups summarises dead letters by kind and class (tenantID 0 = all).
func DeadGroups(ctx context.Context, db Querier, tenantID int64) ([]DeadGroup, error) {
	rows, err := filtered(db).JobAdminDeadGroups(ctx, idPtr(tenantID))
	if err != nil {
		return nil, fmt.Errorf("group dead letters: %w", err)
	}
	out := make([]DeadGroup, len(rows))
	for i, r := range rows {
		out[i] = DeadGroup{Kind: r.Kind, Class: Class(r.ErrorClass), Count: r.N, Flagged: r.Flagged, LastAt: r.LastAt, Example: r.Example}
	}
	return out, nil
}

func (f DeadFilter) before(cursor int64) *int64 {
	b := cursor
	if f.MaxID > 0 && (b <= 0 || b > f.MaxID+1) {
		b = f.MaxID + 1
	}
	return idPtr(b)
}

// ListDead returns one page of dead letters matching f, newest first.
func ListDead(ctx context.Context, db Querier, f DeadFilter, before int64, limit int) (ListPage, error) {
	limit = keyset.Limit(limit)
	rows, err := filtered(db).JobAdminDeadList(ctx, queries.JobAdminDeadListParams{
		Kind: strPtr(f.Kind), ErrorClass: strPtr(string(f.Class)), TenantID: idPtr(f.TenantID), Flagged: f.Flagged,
		BeforeID: f.before(before), Lim: int32(limit + 1),
	})
	if err != nil {
		return ListPage{}, fmt.Errorf("list dead letters: %w", err)
	}
	p := ListPage{Rows: make([]ListRow, 0, len(rows))}
	for _, r := range rows {
		p.Rows = append(p.Rows, ListRow{
			ID: r.ID, TenantID: r.TenantID, Kind: r.Kind, Queue: r.Queue, State: StateDead,
			Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts), FinishedAt: r.FinishedAt,
			LastError: deref(r.LastError), Class: Class(deref(r.ErrorClass)), Flagged: r.Flagged, TraceID: r.TraceID,
		})
	}
	return keyset.Cut(p.Rows, limit, rowID), nil
}

// DeadCount is a bulk action's preview: how many dead letters match (up to
// the cap plus one) and the newest of their ids (DeadFilter.MaxID).
type DeadCount struct {
	N     int64
	MaxID int64
}

// CountDead counts dead letters matching f, up to limit (a bulk action's
// cap plus one): a preview never counts without bound.
func CountDead(ctx context.Context, db Querier, f DeadFilter, limit int) (DeadCount, error) {
	r, err := filtered(db).JobAdminDeadCount(ctx, queries.JobAdminDeadCountParams{
		Kind: strPtr(f.Kind), ErrorClass: strPtr(string(f.Class)), TenantID: idPtr(f.TenantID), Flagged: f.Flagged,
		Lim: int32(limit),
	})
	if err != nil {
		return DeadCount{}, fmt.Errorf("count dead letters: %w", err)
	}
	return DeadCount{N: r.N, MaxID: r.MaxID}, nil
}

// TraceJob is one job of a trace with its attempt history.
type TraceJob struct {
	ID          int64
	TenantID    int64
	Kind        string
	Queue       string
	State       State
	Attempt     int
	MaxAttempts int
	CreatedAt   time.Time
	FinishedAt  *time.Time
	LastError   string
	Class       Class
	WorkerID    string
	Errors      []AttemptError
}

// JobsByTrace returns the jobs of one trace id across tenants, oldest
// first, at most limit.
func JobsByTrace(ctx context.Context, db Querier, traceID string, limit int) ([]TraceJob, error) {
	rows, err := queries.New(db).JobAdminByTrace(ctx, queries.JobAdminByTraceParams{TraceID: traceID, Lim: int32(keyset.Limit(limit))})
	if err != nil {
		return nil, fmt.Errorf("jobs of trace %q: %w", traceID, err)
	}
	out := make([]TraceJob, len(rows))
	for i, r := range rows {
		out[i] = TraceJob{
			ID: r.ID, TenantID: r.TenantID, Kind: r.Kind, Queue: r.Queue, State: State(r.State),
			Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts), CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt,
			LastError: deref(r.LastError), Class: Class(deref(r.ErrorClass)), WorkerID: deref(r.WorkerID),
		}
		if len(r.Errors) > 0 {
			if err := json.Unmarshal(r.Errors, &out[i].Errors); err != nil {
				return nil, fmt.Errorf("decode attempt history of job %d: %w", r.ID, err)
			}
		}
	}
	return out, nil
}

// TenantName names a tenant on the staff pages.
type TenantName struct {
	ID   int64
	Slug string
	Name string
}

// TenantNames lists every tenant (a small table) for filters and labels.
func TenantNames(ctx context.Context, db Querier) ([]TenantName, error) {
	rows, err := queries.New(db).JobAdminTenants(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	out := make([]TenantName, len(rows))
	for i, r := range rows {
		out[i] = TenantName{ID: r.ID, Slug: r.Slug, Name: r.Name}
	}
	return out, nil
}
