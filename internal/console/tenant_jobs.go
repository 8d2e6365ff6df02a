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
// state ("" = all), below before (0 = the newest). It reads scoped to the
// tenant on the app pool, so row-level security pins the tenant as well
// as the query's own filter. Errors are as the tenant may
// see them (job.TenantError).
func (s *Service) TenantJobs(ctx context.Context, tenantID int64, state job.State, before int64) (keyset.Page[Row], error) {
	if state != "" && !job.ValidState(state) {
		return keyset.Page[Row]{}, fmt.Errorf("%w: unknown state %q", job.ErrInvalidJob, state)
	}
	var page keyset.Page[Row]
	err := database.ReadTenant(ctx, s.app, tenantID, func(db database.Querier) (err error) {
		// Planned with the actual values: which index fits depends on the
		// state (the pending, running and dead partial indexes lead with
		// tenant_id).
		page, err = onePage(func(limit int) ([]Row, error) {
			return newFilteredStore(db).tenantList(ctx, tenantID, state, "", before, 0, limit)
		})
		return err
	})
	return page, err
}

// TenantJobQuery is the tenant jobs page's filter as typed; zero fields
// match all.
type TenantJobQuery struct {
	State, Kind string
}

// CountCap is the most a tab counts: beyond it the page says "1,000+".
const CountCap = 1000

// kindCountWindow bounds how many of a state's rows a count with a kind
// filter reads (no index serves the kind): beyond it the count is a
// lower bound.
const kindCountWindow = 5000

// StateCount is how many of a tenant's jobs one tab holds: N, or at least
// N when AtLeast (the count stopped at its bound).
type StateCount struct {
	State   job.State // "" = all
	N       int64
	AtLeast bool
}

// TenantJobsPage is one page of a tenant's jobs with every tab's count.
type TenantJobsPage struct {
	keyset.Page[Row]
	// Counts holds "all" first, then each state in job.States order.
	Counts []StateCount
	// SearchedFrom, when not 0, is the oldest job id a kind-filtered page
	// searched (a window of the tenant's ids below the cursor); Next then
	// continues below it.
	SearchedFrom int64
}

// TenantJobsWithCounts is TenantJobs with a kind filter and the tabs'
// counts, read in one tenant transaction. A bad state or kind is an apperr
// invalid error with a message per field; nothing is read then.
func (s *Service) TenantJobsWithCounts(ctx context.Context, tenantID int64, q TenantJobQuery, before int64) (TenantJobsPage, error) {
	errs := fieldErrs{}
	state := job.State(q.State)
	if state != "" && !job.ValidState(state) {
		errs.set("state", "Unknown state: choose pending, running, succeeded, dead or cancelled.")
	}
	kindFilter(q.Kind, errs)
	if len(errs) > 0 {
		return TenantJobsPage{}, invalid(errs)
	}
	var out TenantJobsPage
	err := database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) (err error) {
		st := newFilteredStore(tx)
		var floor int64
		if q.Kind != "" {
			if floor, err = s.tenantFloor(ctx, st, tenantID, before); err != nil {
				return err
			}
		}
		out.Page, err = onePage(func(limit int) ([]Row, error) {
			return st.tenantList(ctx, tenantID, state, q.Kind, before, floor, limit)
		})
		if err != nil {
			return err
		}
		if floor > 0 && out.Next == 0 {
			// Fewer matches than a page in this window: older ones may
			// lie below it.
			out.Next, out.SearchedFrom = floor, floor
		}
		out.Counts, err = tenantCounts(ctx, st, tenantID, q.Kind)
		return err
	})
	return out, err
}

// tenantFloor is the lowest id a kind-filtered page reads: one scan
// window below the cursor (or the tenant's newest job), 0 when the window
// reaches the first job.
func (s *Service) tenantFloor(ctx context.Context, st store, tenantID, before int64) (int64, error) {
	top := before - 1
	if before == 0 {
		var err error
		if top, err = st.tenantMaxID(ctx, tenantID); err != nil {
			return 0, err
		}
	}
	floor := top - s.scanWindow + 1
	if floor <= 1 {
		return 0, nil
	}
	return floor, nil
}

// tenantCounts counts each state's jobs up to CountCap (a kind filter
// reads at most kindCountWindow rows per state), and "all" as their sum.
func tenantCounts(ctx context.Context, st store, tenantID int64, kind string) ([]StateCount, error) {
	window := CountCap + 1
	if kind != "" {
		window = kindCountWindow
	}
	all := StateCount{}
	out := []StateCount{{}}
	for _, state := range job.States {
		n, capped, err := st.tenantCount(ctx, tenantID, state, kind, window)
		if err != nil {
			return nil, err
		}
		c := StateCount{State: state, N: n, AtLeast: capped}
		if c.N > CountCap {
			c.N, c.AtLeast = CountCap, true
		}
		all.N += c.N
		all.AtLeast = all.AtLeast || c.AtLeast
		out = append(out, c)
	}
	if all.N > CountCap {
		all.N, all.AtLeast = CountCap, true
	}
	out[0] = all
	return out, nil
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
