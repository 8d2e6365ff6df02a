package support

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/queries"
)

func search(ctx context.Context, db database.Querier, q string) ([]TenantSummary, error) {
	rows, err := queries.New(db).SupportTenantSearch(ctx, queries.SupportTenantSearchParams{Q: q, Lim: MaxSearch})
	if err != nil {
		return nil, fmt.Errorf("search tenants: %w", err)
	}
	out := make([]TenantSummary, len(rows))
	for i, r := range rows {
		out[i] = TenantSummary{ID: r.ID, Slug: r.Slug, Name: r.Name, Members: r.Members}
		if r.PlanCode != nil {
			out[i].Plan = *r.PlanCode
		}
		if r.Status != nil {
			out[i].Status = *r.Status
		}
	}
	return out, nil
}

func tenantBySlug(ctx context.Context, db database.Querier, slug string) (*Tenant, error) {
	t, err := queries.New(db).TenantGetBySlug(ctx, slug)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get tenant %s: %w", slug, err)
	}
	return &Tenant{ID: t.ID, Slug: t.Slug, Name: t.Name, TimeZone: t.TimeZone}, nil
}

func members(ctx context.Context, db database.Querier, tenantID int64) ([]Member, error) {
	ms, err := queries.New(db).SupportTenantMembers(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	out := make([]Member, len(ms))
	for i, m := range ms {
		out[i] = Member{UserID: m.UserID, Name: m.Name, Email: m.Email, Role: m.Role, Since: m.CreatedAt,
			DisabledAt: m.DisabledAt, UserActive: m.Active}
		if m.DisabledReason != nil {
			out[i].DisabledReason = *m.DisabledReason
		}
	}
	return out, nil
}

func recentJobs(ctx context.Context, db database.Querier, tenantID int64, limit int) ([]Job, error) {
	js, err := queries.New(db).SupportTenantJobs(ctx, queries.SupportTenantJobsParams{TenantID: tenantID, Limit: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	out := make([]Job, len(js))
	for i, j := range js {
		out[i] = Job{ID: j.ID, Kind: j.Kind, State: j.State, Attempt: int(j.Attempt), MaxAttempts: int(j.MaxAttempts),
			CreatedAt: j.CreatedAt, FinishedAt: j.FinishedAt, TraceID: j.TraceID}
		if j.LastError != nil {
			out[i].LastError = *j.LastError
		}
	}
	return out, nil
}

// claimViewHour reports whether this is staffID's first read of the
// tenant's trail in the hour (the insert that wins the hour's row).
func claimViewHour(ctx context.Context, tx pgx.Tx, tenantID, staffID int64, hour time.Time) (bool, error) {
	_, err := queries.New(tx).StaffAuditViewClaim(ctx, queries.StaffAuditViewClaimParams{TenantID: tenantID, StaffID: staffID, Hour: hour})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("record staff view: %w", err)
	}
	return true, nil
}
