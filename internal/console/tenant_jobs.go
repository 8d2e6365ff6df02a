package console

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/keyset"
)

// TenantJobs returns tenantID's own jobs newest first, optionally in one
// state ("" = all), below before (0 = the newest). It reads in the
// tenant's transaction on the app pool, so row-level security pins the
// tenant as well as the query's own filter. Errors are as the tenant may
// see them (job.TenantError).
func (s *Service) TenantJobs(ctx context.Context, tenantID int64, state job.State, before int64) (keyset.Page[Row], error) {
	if state != "" && !job.ValidState(state) {
		return keyset.Page[Row]{}, fmt.Errorf("%w: unknown state %q", job.ErrInvalidJob, state)
	}
	var page keyset.Page[Row]
	err := database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) (err error) {
		// Planned with the actual values: which index fits depends on the
		// state (the pending, running and dead partial indexes lead with
		// tenant_id).
		page, err = onePage(func(limit int) ([]Row, error) {
			return newFilteredStore(tx).tenantList(ctx, tenantID, state, before, limit)
		})
		return err
	})
	return page, err
}

// onePage reads one page of keyset.DefaultLimit rows with read, which
// is asked for one row more: that row only tells whether another page
// exists.
func onePage(read func(limit int) ([]Row, error)) (keyset.Page[Row], error) {
	limit := keyset.DefaultLimit
	rows, err := read(limit + 1)
	if err != nil {
		return keyset.Page[Row]{}, err
	}
	return keyset.Cut(rows, limit, rowID), nil
}
