// Package tenant holds tenants, their memberships and their projects.
// Every tenant-owned read and write runs in a transaction scoped to one
// tenant (database.InTenantTx), so row-level security backs up each query's
// own tenant filter.
package tenant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/activity"
	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/billing"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/keyset"
	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/plaintext"
	"github.com/jejakhq/jejak/internal/tz"
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
	// ErrSamePlan: the tenant is already on the chosen plan; nothing changes.
	ErrSamePlan = apperr.Invalid("plan", "The tenant is already on this plan.")
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
	if loc, err := tz.Load(t.TimeZone); err == nil {
		return loc
	}
	loc, _ := tz.Load("Asia/Jakarta")
	return loc
}

// Membership is a user's role in a tenant, with the tenant settings that
// widen what a role may see.
type Membership struct {
	TenantID int64
	UserID   int64
	Role     string
	// MembersSeeBilling: the owners let members open the billing page.
	MembersSeeBilling bool
}

// What each tenant role may do; docs/security.md ("Roles") shows the same.
// Owners and admins change tenant data; only owners change the team and
// the tenant's settings; members read. Billing (invoices, charges) is for
// owners and admins, and for members when an owner allows it.

// CanWrite reports whether the role may change tenant data.
func (m *Membership) CanWrite() bool { return canWrite(m.Role) }

// CanSeeBilling reports whether the member may open the billing page.
func (m *Membership) CanSeeBilling() bool { return canWrite(m.Role) || m.MembersSeeBilling }

// ErrStaffDisabled: Jejak staff disabled this person's access to the
// tenant (a two-person approved action); the tenant cannot undo it by
// removing, adding or inviting them: staff lift it.
var ErrStaffDisabled = apperr.Invalid("user",
	"Jejak staff disabled this person's access to this tenant. It stays disabled until Jejak staff lift it; contact support.")

// ErrSettingsOwnersOnly: only owners change the tenant's settings.
var ErrSettingsOwnersOnly = apperr.Forbidden("Only owners can change the tenant's settings.")

// ErrBillingHidden: members see billing only when an owner allows it.
var ErrBillingHidden = apperr.Forbidden("Billing is for owners and admins; an owner can let members see it.")

// SetMembersSeeBilling lets members see the billing page, or stops them
// (owners only), and records settings.members_see_billing with the value.
func (s *Service) SetMembersSeeBilling(ctx context.Context, tenantID int64, actor Actor, on bool) error {
	if actor.Role != RoleOwner {
		return ErrSettingsOwnersOnly
	}
	return database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		if err := newStore(tx).setMembersSeeBilling(ctx, tenantID, on, actor.UserID, s.clock.Now()); err != nil {
			return err
		}
		return s.record(ctx, tx, tenantID, actor, "settings.members_see_billing", "tenant", tenantID,
			map[string]any{"members_see_billing": on})
	})
}

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

// Service is the tenant domain's entry point.
type Service struct {
	app    database.Pool // jejak_app pool: tenant-scoped work
	system database.Pool // jejak_system pool: cross-tenant lookups
	clock  clock.Clock
	audit  *audit.Recorder
	plans  *billing.Service
	// planHook runs in a plan change's transaction (payments); nil = none.
	planHook PlanHook
	outbox   *outbox.Writer
}

// NewService returns a Service. app must be the tenant-facing pool, system
// the cross-tenant pool. Every change it makes is recorded in the tenant's
// audit trail in the change's own transaction.
func NewService(app, system database.Pool, clk clock.Clock) *Service {
	if clk == nil {
		clk = clock.Database{}
	}
	return &Service{app: app, system: system, clock: clk, audit: audit.NewRecorder(clk), plans: billing.NewService(clk),
		outbox: outbox.NewWriter(clk)}
}

// BySlug returns the tenant with that slug. The tenants registry is not
// tenant-owned data: resolving a slug needs no tenant scope.
func (s *Service) BySlug(ctx context.Context, slug string) (*Tenant, error) {
	return newStore(s.app).tenantBySlug(ctx, slug)
}

// Enter returns the tenant named by slug and userID's live membership in
// it, in one query, or ErrNotFound for an unknown slug, the system tenant,
// no membership or a disabled one (all alike: nothing leaks). Every tenant
// page passes through it; the reads that follow still run under row-level
// security, which checks the same membership again.
func (s *Service) Enter(ctx context.Context, slug string, userID int64) (*Tenant, *Membership, error) {
	return newStore(s.system).memberBySlug(ctx, slug, userID)
}

// Gate is what a tenant page's gate read about a user in a tenant: the
// membership row (Role "" when there is none) and the settings that widen
// what it may see.
type Gate struct {
	UserID            int64
	Role              string
	Disabled          bool
	MembersSeeBilling bool
}

// Admit decides whether g lets its user into t: no membership and a
// disabled one answer ErrNotFound alike, as an unknown tenant does. Enter
// and the session lookup that reads the gate with the session
// (signin.SessionMember) both decide here.
func Admit(t Tenant, g Gate) (*Tenant, *Membership, error) {
	if g.Role == "" || g.Disabled {
		return nil, nil, ErrNotFound
	}
	return &t, &Membership{TenantID: t.ID, UserID: g.UserID, Role: g.Role, MembersSeeBilling: g.MembersSeeBilling}, nil
}

// Membership returns userID's membership in tenantID, or ErrNotFound.
func (s *Service) Membership(ctx context.Context, tenantID, userID int64) (*Membership, error) {
	var m *Membership
	err := database.ReadTenant(ctx, s.app, tenantID, func(db database.Querier) (err error) {
		m, err = newStore(db).membership(ctx, tenantID, userID)
		return err
	})
	return m, err
}

// TenantsOf lists the tenants a user belongs to. Memberships span tenants,
// so this is one of the few reads through the system pool.
func (s *Service) TenantsOf(ctx context.Context, userID int64) ([]UserTenant, error) {
	return newStore(s.system).tenantsOfUser(ctx, userID)
}

// Projects lists a tenant's newest projects (at most keyset.MaxLimit),
// newest first.
func (s *Service) Projects(ctx context.Context, tenantID int64) ([]Project, error) {
	var out []Project
	err := database.ReadTenant(ctx, s.app, tenantID, func(db database.Querier) (err error) {
		out, err = newStore(db).projects(ctx, tenantID, 0, keyset.MaxLimit)
		return err
	})
	return out, err
}

// ValidateProjectName trims a project name and checks its length and
// characters.
func ValidateProjectName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch n := utf8.RuneCountInString(name); {
	case n == 0:
		return "", apperr.Invalid("name", "Project name is required.")
	case n > 120:
		return "", apperr.Invalid("name", "Project name must be at most 120 characters.")
	}
	if r, bad := plaintext.NameProblem(name); bad {
		return "", apperr.Invalidf("name", "Project name must not contain control, invisible or text-direction characters (found U+%04X).", r)
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
		return s.record(ctx, tx, tenantID, actor, "project.create", "project", p.ID, map[string]any{"name": p.Name})
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
		return s.record(ctx, tx, tenantID, actor, "project.delete", "project", p.ID, map[string]any{"name": p.Name})
	})
	return p, err
}

// record appends the audit event of a user's change to the tenant's trail.
func (s *Service) record(ctx context.Context, tx pgx.Tx, tenantID int64, actor Actor, action, entity string, entityID int64, detail map[string]any) error {
	b, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encode audit detail: %w", err)
	}
	uid := actor.UserID
	err = s.audit.Append(ctx, tx, audit.Event{
		TenantID: tenantID, ActorKind: audit.ActorUser, ActorID: &uid, Action: action,
		Entity: entity, EntityID: strconv.FormatInt(entityID, 10), Detail: b, TraceID: actor.TraceID,
	})
	if err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return s.publish(ctx, tx, tenantID, actor, action, entity, entityID, detail)
}

// Plan is the tenant's current plan as the home page shows it.
type Plan struct {
	Code      string
	Status    string
	PeriodEnd time.Time
}

// PlanCodes are the plans a tenant may choose.
var PlanCodes = []string{"free", "pro"}

// HomeProjects is how many projects the home page lists at once.
const HomeProjects = 50

// Home is what the tenant home page shows: a page of the projects, newest
// first, below the project id before (0: the newest), and the current plan
// (nil when the tenant has no subscription), read in one tenant-scoped
// transaction.
func (s *Service) Home(ctx context.Context, tenantID, before int64) (keyset.Page[Project], *Plan, error) {
	h, err := s.HomePage(ctx, tenantID, before, time.UTC, time.Time{}, 0)
	return h.Projects, h.Plan, err
}

// OwnerHome is what the owner's home page shows.
type OwnerHome struct {
	Projects keyset.Page[Project]
	Plan     *Plan          // nil without a subscription
	Days     []activity.Day // nil when none were asked for
}

// HomePage is Home with the last days' figures (activity.Chart: days days
// up to now's day in loc; none when days is 0, for the parts of the page
// that show no chart). The page's reads are independent: they go out
// together, in one round trip.
func (s *Service) HomePage(ctx context.Context, tenantID, before int64, loc *time.Location, now time.Time, days int) (OwnerHome, error) {
	var h OwnerHome
	var projects []Project
	reads := []database.Read{
		func(db database.Querier) (err error) {
			projects, err = newStore(db).projects(ctx, tenantID, before, HomeProjects+1)
			return err
		},
		func(db database.Querier) error {
			switch sub, err := billing.Get(ctx, db, tenantID); {
			case errors.Is(err, billing.ErrNotFound):
				return nil
			case err != nil:
				return err
			default:
				h.Plan = &Plan{Code: sub.PlanCode, Status: string(sub.Status), PeriodEnd: sub.PeriodEnd}
				return nil
			}
		},
	}
	var chart *activity.Chart
	if days > 0 {
		chart = activity.NewChart(tenantID, loc, now, days)
		reads = append(reads, chart.Reads(ctx)...)
	}
	if err := database.ReadTenantAll(ctx, s.app, tenantID, reads...); err != nil {
		return OwnerHome{}, err
	}
	h.Projects = keyset.Cut(projects, HomeProjects, func(p *Project) int64 { return p.ID })
	if chart != nil {
		h.Days = chart.Days()
	}
	return h, nil
}

// ChangePlan moves the tenant to another plan. The subscription's history
// keeps the old plan (billing appends a change row) and the audit trail
// records who changed it from what to what.
func (s *Service) ChangePlan(ctx context.Context, tenantID int64, actor Actor, planCode string) error {
	if !canWrite(actor.Role) {
		return ErrReadOnly
	}
	return database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		uid := actor.UserID
		// A "change" to the current plan changes nothing: billing refuses
		// it, so the trail never records a change from pro to pro.
		_, ch, err := s.plans.ChangePlan(ctx, tx, tenantID, planCode, &uid)
		if errors.Is(err, billing.ErrSamePlan) {
			return ErrSamePlan
		}
		if errors.Is(err, billing.ErrUnknownPlan) {
			return apperr.Invalid("plan", "Choose one of the offered plans.")
		}
		if err != nil {
			return err
		}
		from := ""
		if ch.FromPlan != nil {
			from = *ch.FromPlan
		}
		if err := s.record(ctx, tx, tenantID, actor, "subscription.change", "subscription", ch.ID,
			map[string]any{"from_plan": from, "to_plan": ch.ToPlan}); err != nil {
			return err
		}
		return s.planChanged(ctx, tx, tenantID, actor, ch.ToPlan)
	})
}

// SetMembership gives userID role in the tenant (adding them when absent)
// and records membership.set with the old and new role. Only owners may
// change memberships, and the last active owner cannot step down
// (KeepOwner, under the owner lock).
func (s *Service) SetMembership(ctx context.Context, tenantID int64, actor Actor, userID int64, role string) error {
	if actor.Role != RoleOwner {
		return apperr.Forbidden("only owners change memberships")
	}
	if role != RoleOwner && role != RoleAdmin && role != RoleMember {
		return apperr.Invalid("role", "Role must be owner, admin or member.")
	}
	return database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		leaving := int64(0)
		if role != RoleOwner {
			leaving = userID
		}
		if err := KeepOwner(ctx, tx, tenantID, actor.UserID, leaving); err != nil {
			return err
		}
		st := newStore(tx)
		if disabled, err := st.disabled(ctx, tenantID, userID); err != nil {
			return err
		} else if disabled {
			return ErrStaffDisabled
		}
		old, err := st.membership(ctx, tenantID, userID)
		oldRole := ""
		switch {
		case err == nil:
			oldRole = old.Role
		case !errors.Is(err, ErrNotFound):
			return err
		}
		if err := st.upsertMembership(ctx, tenantID, userID, role); err != nil {
			return err
		}
		return s.record(ctx, tx, tenantID, actor, "membership.set", "user", userID,
			map[string]any{"from_role": oldRole, "to_role": role})
	})
}

// RecordSignIn writes auth.signin (or auth.signin_failed) into the trail of
// every tenant the user belongs to, so each owner sees sign-ins to their
// tenant. It runs through the system pool: a sign-in has no tenant scope.
// Staff and unknown e-mails belong to no tenant and are only logged.
func (s *Service) RecordSignIn(ctx context.Context, userID int64, ok bool, ip, traceID string) error {
	action := "auth.signin"
	if !ok {
		action = "auth.signin_failed"
	}
	detail, _ := json.Marshal(map[string]any{"ip": ip})
	return database.InTx(ctx, s.system, func(tx pgx.Tx) error {
		tenants, err := newStore(tx).tenantsOfUser(ctx, userID)
		if err != nil {
			return err
		}
		for _, t := range tenants {
			uid := userID
			if err := s.audit.Append(ctx, tx, audit.Event{TenantID: t.ID, ActorKind: audit.ActorUser, ActorID: &uid,
				Action: action, Entity: "user", EntityID: strconv.FormatInt(userID, 10), Detail: detail, TraceID: traceID}); err != nil {
				return fmt.Errorf("audit %s: %w", action, err)
			}
		}
		return nil
	})
}

func canWrite(role string) bool { return role == RoleOwner || role == RoleAdmin }
