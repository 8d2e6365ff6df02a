package member_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/approval"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/member"
	"github.com/jejakhq/jejak/internal/tenant"
)

// TestStaffDisableStaysUntilStaffLiftIt: the tenant cannot undo a staff
// disable (remove, re-add, invite, accept an older invitation); an admin
// lifts it with a reason, recorded in the tenant's trail.
func TestStaffDisableStaysUntilStaffLiftIt(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	melati := e.id(t, `SELECT id FROM tenants WHERE slug = 'toko-bunga-melati'`)
	budi := e.id(t, `SELECT id FROM users WHERE email = 'budi@melati.test'`)
	rina := e.id(t, `SELECT id FROM users WHERE email = 'rina@melati.test'`)
	support := e.id(t, `SELECT id FROM users WHERE email = 'support@jejak.test'`)
	admin := e.id(t, `SELECT id FROM users WHERE email = 'admin@jejak.test'`)
	owner := tenant.Actor{UserID: budi, Role: tenant.RoleOwner, TraceID: "disable"}
	tn := &tenant.Tenant{ID: melati, Slug: "toko-bunga-melati", Name: "Toko Bunga Melati"}
	// An invitation sent before the disable, then the disable as the
	// approved user.disable-access job leaves it.
	e.exec(t, `INSERT INTO invitations (tenant_id, email, role, invited_by, created_at) VALUES ($1, 'rina@melati.test', 'admin', $2, now())`, melati, budi)
	older := e.id(t, `SELECT id FROM invitations WHERE email = 'rina@melati.test'`)
	e.exec(t, `UPDATE memberships SET disabled_at = now(), disabled_reason = 'ponsel hilang' WHERE tenant_id = $1 AND user_id = $2`, melati, rina)
	stillDisabled := func(step string) {
		t.Helper()
		if n := e.id(t, `SELECT count(*) FROM memberships WHERE tenant_id = $1 AND user_id = $2 AND disabled_at IS NOT NULL`, melati, rina); n != 1 {
			t.Fatalf("after %s: rina's disabled membership is gone", step)
		}
		if _, err := e.tenants.Membership(ctx, melati, rina); !errors.Is(err, tenant.ErrNotFound) {
			t.Fatalf("after %s: rina is admitted (%v)", step, err)
		}
	}

	if err := e.members.Remove(ctx, melati, owner, rina); !errors.Is(err, tenant.ErrStaffDisabled) {
		t.Fatalf("remove: %v, want ErrStaffDisabled", err)
	}
	stillDisabled("remove")
	if err := e.members.ChangeRole(ctx, melati, owner, rina, tenant.RoleAdmin); !errors.Is(err, tenant.ErrStaffDisabled) {
		t.Fatalf("role change: %v, want ErrStaffDisabled", err)
	}
	if err := e.tenants.SetMembership(ctx, melati, owner, rina, tenant.RoleAdmin); !errors.Is(err, tenant.ErrStaffDisabled) {
		t.Fatalf("re-add: %v, want ErrStaffDisabled", err)
	}
	stillDisabled("re-add")
	e.exec(t, `UPDATE invitations SET revoked_at = now() WHERE id = $1`, older)
	_, err := e.members.Invite(ctx, tn, owner, "Budi", "rina@melati.test", tenant.RoleMember)
	if !errors.Is(err, member.ErrInviteDisabled) || apperr.FieldsOf(err)["email"] == "" {
		t.Fatalf("invite: %v, want ErrInviteDisabled on the email field", err)
	}
	e.exec(t, `UPDATE invitations SET revoked_at = NULL WHERE id = $1`, older)
	if _, err := e.members.Accept(ctx, rina, "rina@melati.test", older, "accept"); !errors.Is(err, tenant.ErrStaffDisabled) {
		t.Fatalf("accepting an older invitation: %v, want ErrStaffDisabled", err)
	}
	stillDisabled("accept")

	// Only an admin lifts it, and only with a reason.
	approvals := approval.NewService(e.db.System, nil, clock.Database{})
	if err := approvals.LiftDisable(ctx, approval.Staff{UserID: support}, melati, rina, "ok"); !errors.Is(err, approval.ErrAdminsOnly) {
		t.Fatalf("support lifting: %v, want ErrAdminsOnly", err)
	}
	if err := approvals.LiftDisable(ctx, approval.Staff{UserID: budi}, melati, rina, "ok"); !errors.Is(err, approval.ErrNotStaff) {
		t.Fatalf("the owner lifting: %v, want ErrNotStaff", err)
	}
	if err := approvals.LiftDisable(ctx, approval.Staff{UserID: admin}, melati, rina, "  "); apperr.CodeOf(err) != apperr.CodeInvalid {
		t.Fatalf("lifting without a reason: %v", err)
	}
	stillDisabled("refused lifts")
	if err := approvals.LiftDisable(ctx, approval.Staff{UserID: admin, TraceID: "lift"}, melati, rina, "ponsel ditemukan"); err != nil {
		t.Fatalf("admin lifting: %v", err)
	}
	if m, err := e.tenants.Membership(ctx, melati, rina); err != nil || m.Role != tenant.RoleMember {
		t.Fatalf("after the lift: %+v %v", m, err)
	}
	if n := e.id(t, `SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'member.access_restored'
		AND actor_kind = 'staff' AND actor_id = $2 AND entity_id = $3::bigint::text AND detail->>'reason' = 'ponsel ditemukan'
		AND detail->>'disabled_reason' = 'ponsel hilang' AND trace_id = 'lift'`, melati, admin, rina); n != 1 {
		t.Fatalf("member.access_restored events: %d", n)
	}
	if err := approvals.LiftDisable(ctx, approval.Staff{UserID: admin}, melati, rina, "again"); !errors.Is(err, approval.ErrNotDisabled) {
		t.Fatalf("lifting twice: %v", err)
	}
	if err := e.members.Remove(ctx, melati, owner, rina); err != nil { // lifted: the owner manages it again
		t.Fatalf("remove after the lift: %v", err)
	}
}
