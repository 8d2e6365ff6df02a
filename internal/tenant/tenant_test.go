package tenant_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/testdb"
)

type env struct {
	db  *testdb.DB
	svc *tenant.Service
}

func setup(t *testing.T) *env {
	t.Helper()
	db := testdb.New(t)
	if err := demo.Seed(context.Background(), db.System); err != nil {
		t.Fatal(err)
	}
	return &env{db: db, svc: tenant.NewService(db.App, db.System, clock.Database{})}
}

func (e *env) id(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	var id int64
	if err := e.db.Admin.QueryRow(context.Background(), sql, args...).Scan(&id); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return id
}

func TestSetMembershipIsAuditedAndKeepsAnOwner(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	melati := e.id(t, `SELECT id FROM tenants WHERE slug = 'toko-bunga-melati'`)
	budi := e.id(t, `SELECT id FROM users WHERE email = 'budi@melati.test'`)
	rina := e.id(t, `SELECT id FROM users WHERE email = 'rina@melati.test'`)
	owner := tenant.Actor{UserID: budi, Role: tenant.RoleOwner, TraceID: "t-1"}

	if err := e.svc.SetMembership(ctx, melati, owner, rina, tenant.RoleAdmin); err != nil {
		t.Fatalf("promote rina: %v", err)
	}
	m, err := e.svc.Membership(ctx, melati, rina)
	if err != nil || m.Role != tenant.RoleAdmin {
		t.Fatalf("rina's role: %+v %v", m, err)
	}
	n := e.id(t, `SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'membership.set'
		AND entity = 'user' AND entity_id = $2::bigint::text AND detail->>'from_role' = 'member' AND detail->>'to_role' = 'admin'
		AND actor_id = $3 AND trace_id = 't-1'`, melati, rina, budi)
	if n != 1 {
		t.Fatalf("membership.set events: %d", n)
	}

	// The last owner cannot step down; nothing is written.
	before := e.id(t, `SELECT count(*) FROM audit_events`)
	err = e.svc.SetMembership(ctx, melati, owner, budi, tenant.RoleMember)
	if apperr.CodeOf(err) != apperr.CodeInvalid {
		t.Fatalf("last owner stepping down: %v", err)
	}
	if m, _ := e.svc.Membership(ctx, melati, budi); m.Role != tenant.RoleOwner {
		t.Fatalf("budi's role changed to %s", m.Role)
	}
	for _, tc := range []struct {
		actor tenant.Actor
		role  string
		code  apperr.Code
	}{
		{tenant.Actor{UserID: rina, Role: tenant.RoleAdmin}, tenant.RoleOwner, apperr.CodeForbidden}, // only owners
		{owner, "superuser", apperr.CodeInvalid},
	} {
		if err := e.svc.SetMembership(ctx, melati, tc.actor, rina, tc.role); apperr.CodeOf(err) != tc.code {
			t.Errorf("SetMembership(%s by %s): %v, want %s", tc.role, tc.actor.Role, err, tc.code)
		}
	}
	if after := e.id(t, `SELECT count(*) FROM audit_events`); after != before {
		t.Fatalf("refused changes wrote %d audit events", after-before)
	}
}

func TestProjectsStayInTheirTenant(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	melati := e.id(t, `SELECT id FROM tenants WHERE slug = 'toko-bunga-melati'`)
	senja := e.id(t, `SELECT id FROM tenants WHERE slug = 'kopi-senja'`)
	sari := e.id(t, `SELECT id FROM users WHERE email = 'sari@senja.test'`)
	melatiProject := e.id(t, `SELECT id FROM projects WHERE tenant_id = $1 LIMIT 1`, melati)

	// Deleting another tenant's project through one's own tenant is not found.
	_, err := e.svc.DeleteProject(ctx, senja, tenant.Actor{UserID: sari, Role: tenant.RoleOwner}, melatiProject)
	if !errors.Is(err, tenant.ErrNotFound) {
		t.Fatalf("cross-tenant delete: %v", err)
	}
	ps, err := e.svc.Projects(ctx, senja)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.TenantID != senja {
			t.Fatalf("senja sees project %+v", p)
		}
	}
	if _, err := e.svc.CreateProject(ctx, senja, tenant.Actor{UserID: sari, Role: tenant.RoleMember}, "X"); !errors.Is(err, tenant.ErrReadOnly) {
		t.Fatalf("member create: %v", err)
	}
}

// TestChangePlanRefusesANoOp: a "change" to the current plan is refused
// and writes nothing (no plan history row, no audit event); a real change
// is recorded once.
func TestChangePlanRefusesANoOp(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	melati := e.id(t, `SELECT id FROM tenants WHERE slug = 'toko-bunga-melati'`)
	budi := e.id(t, `SELECT id FROM users WHERE email = 'budi@melati.test'`)
	owner := tenant.Actor{UserID: budi, Role: tenant.RoleOwner, TraceID: "t-plan"}
	written := func() int64 {
		return e.id(t, `SELECT (SELECT count(*) FROM audit_events WHERE tenant_id = $1)
			+ (SELECT count(*) FROM subscription_changes WHERE tenant_id = $1)`, melati)
	}
	before := written()
	err := e.svc.ChangePlan(ctx, melati, owner, "pro") // Melati is on pro
	if !errors.Is(err, tenant.ErrSamePlan) || apperr.CodeOf(err) != apperr.CodeInvalid {
		t.Fatalf("pro → pro: %v, want ErrSamePlan", err)
	}
	if after := written(); after != before {
		t.Fatalf("a no-op plan change wrote %d rows", after-before)
	}
	if err := e.svc.ChangePlan(ctx, melati, owner, "free"); err != nil {
		t.Fatal(err)
	}
	if after := written(); after != before+2 {
		t.Fatalf("pro → free wrote %d rows, want 2 (history + audit)", after-before)
	}
	if err := e.svc.ChangePlan(ctx, melati, owner, " free "); !errors.Is(err, tenant.ErrSamePlan) {
		t.Fatalf("free → free: %v", err)
	}
}

// TestEnterAdmitsLiveMembersOnly: a tenant page's gate finds the tenant and
// the member's role by slug; an unknown slug, a user of another tenant, a
// disabled membership and the system tenant are all the same not-found.
func TestEnterAdmitsLiveMembersOnly(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	budi := e.id(t, `SELECT id FROM users WHERE email = 'budi@melati.test'`)
	sari := e.id(t, `SELECT id FROM users WHERE email = 'sari@senja.test'`)
	rina := e.id(t, `SELECT id FROM users WHERE email = 'rina@melati.test'`)
	tn, m, err := e.svc.Enter(ctx, "toko-bunga-melati", budi)
	if err != nil || tn.Slug != "toko-bunga-melati" || tn.Name == "" || m.Role != tenant.RoleOwner || m.TenantID != tn.ID || m.UserID != budi {
		t.Fatalf("owner: %+v %+v %v", tn, m, err)
	}
	if _, err := e.db.Admin.Exec(ctx, `UPDATE memberships SET disabled_at = now(), disabled_reason = 'test'
		WHERE user_id = $1 AND tenant_id = $2`, rina, tn.ID); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		slug string
		user int64
	}{{"no-such-tenant", budi}, {"toko-bunga-melati", sari}, {"toko-bunga-melati", rina}, {"", budi}} {
		if _, _, err := e.svc.Enter(ctx, c.slug, c.user); !errors.Is(err, tenant.ErrNotFound) {
			t.Errorf("Enter(%q, %d): %v, want ErrNotFound", c.slug, c.user, err)
		}
	}
	// The system tenant (a migration creates it) has no pages either, even
	// for a member of it.
	var slug string
	if err := e.db.Admin.QueryRow(ctx, `SELECT slug FROM tenants WHERE is_system`).Scan(&slug); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Admin.Exec(ctx, `INSERT INTO memberships (tenant_id, user_id, role)
		SELECT id, $1, 'owner' FROM tenants WHERE is_system`, budi); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.svc.Enter(ctx, slug, budi); !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("the system tenant: %v, want ErrNotFound", err)
	}
}
