package job

import (
	"context"
	"fmt"
	"time"

	"github.com/jejakhq/jejak/internal/queries"
)

// TenantJob is one job as its tenant's owner sees it on the read-only jobs
// page: no payload, no worker internals.
type TenantJob struct {
	ID          int64
	Kind        string
	Queue       string
	State       State
	Attempt     int
	MaxAttempts int
	AvailableAt time.Time
	CreatedAt   time.Time
	FinishedAt  *time.Time
	LastError   string
	Class       Class
	TraceID     string
}

// TenantJobPage is one page of a tenant's jobs, newest first. NextBefore is
// the id to pass as before for the next (older) page, 0 on the last page.
type TenantJobPage struct {
	Jobs       []TenantJob
	NextBefore int64
}

// MaxTenantJobPage bounds a page of ListTenantJobs.
const MaxTenantJobPage = 200

// ValidState reports whether s names a job state.
func ValidState(s State) bool {
	switch s {
	case StatePending, StateRunning, StateSucceeded, StateDead, StateCancelled:
		return true
	}
	return false
}

// ListTenantJobs returns tenantID's jobs newest first, optionally in one
// state ("" = all), older than before (0 = from the newest), keyset on id.
// Run it in database.InTenantTx for tenantID so row-level security pins the
// tenant too.
func ListTenantJobs(ctx context.Context, db Querier, tenantID int64, state State, before int64, limit int) (TenantJobPage, error) {
	if state != "" && !ValidState(state) {
		return TenantJobPage{}, fmt.Errorf("%w: unknown state %q", ErrInvalidJob, state)
	}
	if limit <= 0 || limit > MaxTenantJobPage {
		limit = 50
	}
	p := queries.JobTenantListParams{TenantID: tenantID, Lim: int32(limit + 1)}
	if state != "" {
		s := string(state)
		p.State = &s
	}
	if before > 0 {
		p.BeforeID = &before
	}
	// Planned with the actual values: which index fits depends on the state
	// (the pending, running and dead partial indexes lead with tenant_id).
	rows, err := filtered(db).JobTenantList(ctx, p)
	if err != nil {
		return TenantJobPage{}, fmt.Errorf("list jobs of tenant %d: %w", tenantID, err)
	}
	page := TenantJobPage{Jobs: make([]TenantJob, 0, len(rows))}
	for _, r := range rows {
		page.Jobs = append(page.Jobs, TenantJob{
			ID: r.ID, Kind: r.Kind, Queue: r.Queue, State: State(r.State), Attempt: int(r.Attempt),
			MaxAttempts: int(r.MaxAttempts), AvailableAt: r.AvailableAt, CreatedAt: r.CreatedAt,
			FinishedAt: r.FinishedAt, LastError: deref(r.LastError), Class: Class(deref(r.ErrorClass)),
			TraceID: r.TraceID,
		})
	}
	if len(page.Jobs) > limit {
		page.Jobs = page.Jobs[:limit]
		page.NextBefore = page.Jobs[limit-1].ID
	}
	return page, nil
}
