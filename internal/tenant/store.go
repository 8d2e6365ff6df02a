package tenant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/queries"
)

// store converts between sqlc rows and domain types; it is the only file of
// the package that sees internal/queries.
type store struct{ q *queries.Queries }

func newStore(db queries.DBTX) store { return store{q: queries.New(db)} }

func (s store) tenantBySlug(ctx context.Context, slug string) (*Tenant, error) {
	r, err := s.q.TenantGetBySlug(ctx, slug)
	if err != nil {
		return nil, mapErr(err, "get tenant by slug")
	}
	return tenantFromRow(r), nil
}

func (s store) memberBySlug(ctx context.Context, slug string, userID int64) (*Tenant, *Membership, error) {
	r, err := s.q.TenantMemberBySlug(ctx, queries.TenantMemberBySlugParams{Slug: slug, UserID: userID})
	if err != nil {
		return nil, nil, mapErr(err, "get tenant membership by slug")
	}
	return Admit(*tenantFromRow(r.Tenant), Gate{UserID: userID, Role: r.Role, Disabled: r.DisabledAt != nil,
		MembersSeeBilling: r.MembersSeeBilling})
}

func (s store) membership(ctx context.Context, tenantID, userID int64) (*Membership, error) {
	r, err := s.q.MembershipGetWithSettings(ctx, queries.MembershipGetWithSettingsParams{TenantID: tenantID, UserID: userID})
	if err != nil {
		return nil, mapErr(err, "get membership")
	}
	if r.DisabledAt != nil {
		// A disabled membership admits nobody; it answers like no membership.
		return nil, ErrNotFound
	}
	return &Membership{TenantID: r.TenantID, UserID: r.UserID, Role: r.Role, MembersSeeBilling: r.MembersSeeBilling}, nil
}

func (s store) setMembersSeeBilling(ctx context.Context, tenantID int64, on bool, by int64, now *time.Time) error {
	err := s.q.TenantSettingsSetMembersSeeBilling(ctx, queries.TenantSettingsSetMembersSeeBillingParams{
		TenantID: tenantID, MembersSeeBilling: on, UpdatedBy: &by, Now: now})
	if err != nil {
		return fmt.Errorf("set members_see_billing: %w", err)
	}
	return nil
}

func (s store) tenantsOfUser(ctx context.Context, userID int64) ([]UserTenant, error) {
	rows, err := s.q.MembershipListByUser(ctx, userID)
	if err != nil {
		return nil, fmt.Errorf("list tenants of user: %w", err)
	}
	out := make([]UserTenant, len(rows))
	for i, r := range rows {
		out[i] = UserTenant{Tenant: Tenant{ID: r.TenantID, Slug: r.Slug, Name: r.Name}, Role: r.Role}
	}
	return out, nil
}

func (s store) projects(ctx context.Context, tenantID, before int64, limit int) ([]Project, error) {
	var beforeID *int64
	if before > 0 {
		beforeID = &before
	}
	rows, err := s.q.ProjectListByTenant(ctx, queries.ProjectListByTenantParams{TenantID: tenantID, BeforeID: beforeID, Lim: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	out := make([]Project, len(rows))
	for i, r := range rows {
		out[i] = projectFromRow(r)
	}
	return out, nil
}

func (s store) insertProject(ctx context.Context, tenantID int64, name string, by int64, now *time.Time) (*Project, error) {
	r, err := s.q.ProjectInsert(ctx, queries.ProjectInsertParams{TenantID: tenantID, Name: name, CreatedBy: &by, Now: now})
	if err != nil {
		return nil, fmt.Errorf("insert project: %w", err)
	}
	p := projectFromRow(r)
	return &p, nil
}

func (s store) deleteProject(ctx context.Context, tenantID, id int64) (*Project, error) {
	r, err := s.q.ProjectDelete(ctx, queries.ProjectDeleteParams{TenantID: tenantID, ID: id})
	if err != nil {
		return nil, mapErr(err, "delete project")
	}
	p := projectFromRow(r)
	return &p, nil
}

func (s store) upsertMembership(ctx context.Context, tenantID, userID int64, role string) error {
	if _, err := s.q.MembershipUpsert(ctx, queries.MembershipUpsertParams{TenantID: tenantID, UserID: userID, Role: role}); err != nil {
		return fmt.Errorf("set membership: %w", err)
	}
	return nil
}

func tenantFromRow(r queries.Tenant) *Tenant {
	return &Tenant{ID: r.ID, Slug: r.Slug, Name: r.Name, TimeZone: r.TimeZone}
}

func projectFromRow(r queries.Project) Project {
	return Project{TenantID: r.TenantID, ID: r.ID, Name: r.Name, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt}
}

func mapErr(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (s store) names(ctx context.Context) ([]Name, error) {
	rows, err := s.q.TenantListNames(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tenant names: %w", err)
	}
	out := make([]Name, len(rows))
	for i, r := range rows {
		out[i] = Name{ID: r.ID, Slug: r.Slug, Name: r.Name, System: r.IsSystem}
	}
	return out, nil
}

// lockOwners locks the tenant's owner rows and returns the active owners.
func (s store) lockOwners(ctx context.Context, tenantID int64) ([]int64, error) {
	rows, err := s.q.MembershipLockOwners(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("lock owners: %w", err)
	}
	var active []int64
	for _, r := range rows {
		if !r.Disabled {
			active = append(active, r.UserID)
		}
	}
	return active, nil
}

// disabled reports whether userID's membership exists and staff disabled it.
func (s store) disabled(ctx context.Context, tenantID, userID int64) (bool, error) {
	r, err := s.q.MembershipGet(ctx, queries.MembershipGetParams{TenantID: tenantID, UserID: userID})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get membership: %w", err)
	}
	return r.DisabledAt != nil, nil
}
