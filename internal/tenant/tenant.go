// Package tenant holds tenants, their memberships and their projects.
// Every tenant-owned read and write runs in a transaction scoped to one
// tenant (database.InTenantTx), so row-level security backs up each query's
// own tenant filter.
package tenant

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
)

// Membership roles within a tenant.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
)

var (
	// ErrNotFound hides whether a tenant, membership or project exists in
	// another tenant: callers answer 404 either way.
	ErrNotFound = apperr.NotFound("not found")
	// ErrReadOnly: members may look but not change.
	ErrReadOnly = apperr.Forbidden("members have read-only access")
)

// Tenant is one customer organisation.
type Tenant struct {
	ID       int64
	Slug     string
	Name     string
	TimeZone string
}

// Location returns the tenant's time zone, Asia/Jakarta when unknown.
func (t *Tenant) Location() *time.Location {
	if loc, err := time.LoadLocation(t.TimeZone); err == nil {
		return loc
	}
	loc, _ := time.LoadLocation("Asia/Jakarta")
	return loc
}

// Membership is a user's role in a tenant.
type Membership struct {
	TenantID int64
	UserID   int64
	Role     string
}

// CanWrite reports whether the role may change tenant data.
func (m *Membership) CanWrite() bool { return m.Role == RoleOwner || m.Role == RoleAdmin }

// UserTenant is a tenant as listed for one user.
type UserTenant struct {
	Tenant
	Role string
}

// Project is a tenant's project.
type Project struct {
	TenantID  int64
	ID        int64
	Name      string
	CreatedBy *int64
	CreatedAt time.Time
}

// Actor is who performs a change, for authorisation and the audit trail.
type Actor struct {
	UserID  int64
	Role    string // membership role in the tenant
	TraceID string
}

// Auditor records the audit event of a change in the change's transaction.
// The audit package implements it; nil records nothing (tests of this
// package alone).
type Auditor interface {
	RecordChange(ctx context.Context, tx pgx.Tx, tenantID int64, actorID *int64, action, entity, entityID string, detail map[string]any, traceID string) error
}

// Service is the tenant domain's entry point.
type Service struct {
	app    database.Beginner // jejak_app pool: tenant-scoped work
	system database.Beginner // jejak_system pool: cross-tenant lookups
	clock  clock.Clock
	audit  Auditor
}

// NewService returns a Service. app must be the tenant-facing pool, system
// the cross-tenant pool.
func NewService(app, system database.Beginner, clk clock.Clock, audit Auditor) *Service {
	if clk == nil {
		clk = clock.Database{}
	}
	return &Service{app: app, system: system, clock: clk, audit: audit}
}

// BySlug returns the tenant with that slug. The tenants registry is not
// tenant-owned data: resolving a slug needs no tenant scope.
func (s *Service) BySlug(ctx context.Context, slug string) (*Tenant, error) {
	var t *Tenant
	err := database.InTx(ctx, s.app, func(tx pgx.Tx) (err error) {
		t, err = newStore(tx).tenantBySlug(ctx, slug)
		return err
	})
	return t, err
}

// Membership returns userID's membership in tenantID, or ErrNotFound.
func (s *Service) Membership(ctx context.Context, tenantID, userID int64) (*Membership, error) {
	var m *Membership
	err := database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) (err error) {
		m, err = newStore(tx).membership(ctx, tenantID, userID)
		return err
	})
	return m, err
}

// TenantsOf lists the tenants a user belongs to. Memberships span tenants,
// so this is one of the few reads through the system pool.
func (s *Service) TenantsOf(ctx context.Context, userID int64) ([]UserTenant, error) {
	var out []UserTenant
	err := database.InTx(ctx, s.system, func(tx pgx.Tx) (err error) {
		out, err = newStore(tx).tenantsOfUser(ctx, userID)
		return err
	})
	return out, err
}

// Projects lists a tenant's projects, newest first.
func (s *Service) Projects(ctx context.Context, tenantID int64) ([]Project, error) {
	var out []Project
	err := database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) (err error) {
		out, err = newStore(tx).projects(ctx, tenantID)
		return err
	})
	return out, err
}

// ValidateProjectName trims a project name and checks its length.
func ValidateProjectName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch n := utf8.RuneCountInString(name); {
	case n == 0:
		return "", apperr.Invalid("name", "Project name is required.")
	case n > 120:
		return "", apperr.Invalid("name", "Project name must be at most 120 characters.")
	}
	return name, nil
}

// CreateProject creates a project and records project.create in the same
// transaction.
func (s *Service) CreateProject(ctx context.Context, tenantID int64, actor Actor, name string) (*Project, error) {
	if !canWrite(actor.Role) {
		return nil, ErrReadOnly
	}
	name, err := ValidateProjectName(name)
	if err != nil {
		return nil, err
	}
	var p *Project
	err = database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		var err error
		if p, err = newStore(tx).insertProject(ctx, tenantID, name, actor.UserID, s.clock.Now()); err != nil {
			return err
		}
		return s.record(ctx, tx, tenantID, actor, "project.create", p, nil)
	})
	return p, err
}

// DeleteProject deletes a project of the tenant (ErrNotFound when it is
// not the tenant's) and records project.delete with the project's name.
func (s *Service) DeleteProject(ctx context.Context, tenantID int64, actor Actor, projectID int64) (*Project, error) {
	if !canWrite(actor.Role) {
		return nil, ErrReadOnly
	}
	var p *Project
	err := database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		var err error
		if p, err = newStore(tx).deleteProject(ctx, tenantID, projectID); err != nil {
			return err
		}
		return s.record(ctx, tx, tenantID, actor, "project.delete", p, nil)
	})
	return p, err
}

func (s *Service) record(ctx context.Context, tx pgx.Tx, tenantID int64, actor Actor, action string, p *Project, extra map[string]any) error {
	if s.audit == nil {
		return nil
	}
	detail := map[string]any{"name": p.Name}
	for k, v := range extra {
		detail[k] = v
	}
	uid := actor.UserID
	if err := s.audit.RecordChange(ctx, tx, tenantID, &uid, action, "project", strconv.FormatInt(p.ID, 10), detail, actor.TraceID); err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}

func canWrite(role string) bool { return role == RoleOwner || role == RoleAdmin }

// IsNotFound reports whether err means "not found" in this package.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
