package job

import (
	"context"
	"fmt"

	"github.com/jejakhq/jejak/internal/queries"
)

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
// Errors are as the tenant may see them (TenantError).
func ListTenantJobs(ctx context.Context, db Querier, tenantID int64, state State, before int64, limit int) (ListPage, error) {
	if state != "" && !ValidState(state) {
		return ListPage{}, fmt.Errorf("%w: unknown state %q", ErrInvalidJob, state)
	}
	if limit <= 0 || limit > MaxListPage {
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
		return ListPage{}, fmt.Errorf("list jobs of tenant %d: %w", tenantID, err)
	}
	page := ListPage{Rows: make([]ListRow, 0, len(rows))}
	for _, r := range rows {
		page.Rows = append(page.Rows, ListRow{
			ID: r.ID, Kind: r.Kind, Queue: r.Queue, State: State(r.State), Attempt: int(r.Attempt),
			MaxAttempts: int(r.MaxAttempts), AvailableAt: r.AvailableAt, CreatedAt: r.CreatedAt,
			FinishedAt: r.FinishedAt, LastError: TenantError(deref(r.LastError)), Class: Class(deref(r.ErrorClass)),
			TraceID: r.TraceID,
		})
	}
	if len(page.Rows) > limit {
		page.Rows = page.Rows[:limit]
		page.Next = page.Rows[limit-1].ID
	}
	return page, nil
}
