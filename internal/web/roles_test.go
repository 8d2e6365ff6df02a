package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestBillingForOwnersAndAdminsUnlessAllowed: a member neither opens the
// billing page nor sees its link (nor the webhooks link) until an owner
// allows it; the change is in the trail, and only owners make it.
func TestBillingForOwnersAndAdminsUnlessAllowed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	owner, admin, member := f.client(), f.client(), f.client()
	owner.login("budi@melati.test")
	admin.login("eko@melati.test")
	member.login("rina@melati.test")
	const billing = "/t/toko-bunga-melati/billing"

	if a := admin.get(billing); a.status != http.StatusOK {
		t.Fatalf("admin: %d", a.status)
	}
	if a := member.get(billing); a.status != http.StatusForbidden {
		t.Fatalf("member before it is allowed: %d", a.status)
	}
	home := member.get("/t/toko-bunga-melati/")
	for _, link := range []string{`data-testid="nav-billing"`, `data-testid="nav-webhooks"`, `href="/t/toko-bunga-melati/webhooks"`} {
		if home.status != http.StatusOK || strings.Contains(home.body, link) {
			t.Fatalf("member's page offers %s (%d)", link, home.status)
		}
	}
	if a := admin.get("/t/toko-bunga-melati/"); !strings.Contains(a.body, `data-testid="nav-billing"`) || !strings.Contains(a.body, `data-testid="nav-webhooks"`) {
		t.Fatalf("admin's page lacks the billing or webhooks link")
	}

	// Only owners change the setting.
	for _, c := range []*client{admin, member} {
		if a := c.post("/t/toko-bunga-melati/settings/billing-visibility", c.withCSRF(url.Values{"members_see_billing": {"on"}}), false); a.status != http.StatusForbidden {
			t.Fatalf("non-owner allowing: %d", a.status)
		}
	}
	if a := owner.post("/t/toko-bunga-melati/settings/billing-visibility", owner.withCSRF(url.Values{"members_see_billing": {"maybe"}}), false); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("bad value: %d", a.status)
	}
	if a := owner.get(billing); !strings.Contains(a.body, `data-testid="billing-visibility"`) {
		t.Fatalf("the owner's billing page has no visibility switch")
	}
	if a := owner.post("/t/toko-bunga-melati/settings/billing-visibility", owner.withCSRF(url.Values{"members_see_billing": {"on"}}), false); a.status != http.StatusSeeOther {
		t.Fatalf("owner allowing: %d %.300s", a.status, a.body)
	}
	if a := member.get(billing); a.status != http.StatusOK || strings.Contains(a.body, `data-testid="billing-visibility"`) {
		t.Fatalf("member once allowed: %d (or sees the switch)", a.status)
	}
	if a := member.get("/t/toko-bunga-melati/"); !strings.Contains(a.body, `data-testid="nav-billing"`) || strings.Contains(a.body, `data-testid="nav-webhooks"`) {
		t.Fatalf("member's navigation once billing is allowed is wrong")
	}
	if a := owner.post("/t/toko-bunga-melati/settings/billing-visibility", owner.withCSRF(url.Values{"members_see_billing": {"off"}}), false); a.status != http.StatusSeeOther {
		t.Fatalf("owner hiding: %d", a.status)
	}
	if a := member.get(billing); a.status != http.StatusForbidden {
		t.Fatalf("member after it is hidden again: %d", a.status)
	}
	if n := f.count(`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'settings.members_see_billing' AND actor_id = $2`,
		f.tenantID("toko-bunga-melati"), f.userID("budi@melati.test")); n != 2 {
		t.Fatalf("settings.members_see_billing events: %d, want 2", n)
	}
}

// TestSupportSeesButAdminsDecide: the same staff pages show admins the
// actions only they may take and show support none of them.
func TestSupportSeesButAdminsDecide(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.makeDead("toko-bunga-melati", "email.weekly-report", 1, "smtp 550")
	f.makeApprovals(1)
	sup, adm := f.client(), f.client()
	sup.login("support@jejak.test")
	adm.login("admin@jejak.test")
	for _, c := range []struct {
		path, adminOnly string
	}{
		{"/admin/dead", `data-testid="bulk-retry"`},
		{"/admin/dead", `data-testid="discard"`},
		{"/admin/approvals", `data-testid="approve"`},
		{"/admin", `data-testid="pause-form"`},
	} {
		as, aa := sup.get(c.path), adm.get(c.path)
		if as.status != http.StatusOK || aa.status != http.StatusOK {
			t.Fatalf("%s: support %d, admin %d", c.path, as.status, aa.status)
		}
		if strings.Contains(as.body, c.adminOnly) || !strings.Contains(aa.body, c.adminOnly) {
			t.Errorf("%s: %s shown to support %v, to admin %v", c.path, c.adminOnly,
				strings.Contains(as.body, c.adminOnly), strings.Contains(aa.body, c.adminOnly))
		}
	}
	if a := sup.get("/admin/approvals"); !strings.Contains(a.body, `data-testid="admins-decide"`) {
		t.Errorf("support's approvals page does not say admins decide")
	}
	// Retrying every failed outbox message at once is bulk: admins only.
	if a := sup.post("/admin/outbox/retry", sup.withCSRF(url.Values{"reason": {"all"}}), false); a.status != http.StatusForbidden {
		t.Errorf("support retrying every outbox message: %d", a.status)
	}
	if a := adm.post("/admin/outbox/retry", adm.withCSRF(url.Values{"reason": {"all"}}), false); a.status != http.StatusSeeOther {
		t.Errorf("admin retrying every outbox message: %d", a.status)
	}
}

// TestInviteRefusedForStaffDisabledMember: after staff disabled a member,
// the owner can neither remove nor invite them again (a clear message,
// nothing written); an admin lifts it with a reason, support cannot.
func TestInviteRefusedForStaffDisabledMember(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	melati, rina := f.tenantID("toko-bunga-melati"), f.userID("rina@melati.test")
	if _, err := f.db.Admin.Exec(context.Background(), `UPDATE memberships SET disabled_at = now(), disabled_reason = 'akun dibajak'
		WHERE tenant_id = $1 AND user_id = $2`, melati, rina); err != nil {
		t.Fatal(err)
	}
	owner := f.client()
	owner.login("budi@melati.test")
	if a := owner.get("/t/toko-bunga-melati/members"); !strings.Contains(a.body, `data-testid="member-disabled"`) {
		t.Fatalf("the team page does not show the staff disable")
	}
	a := owner.post("/t/toko-bunga-melati/members/invite", owner.withCSRF(url.Values{"email": {"rina@melati.test"}, "role": {"member"}}), true)
	if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `data-testid="field-error-email"`) ||
		!strings.Contains(a.body, "cannot be invited again until Jejak staff lift it") {
		t.Fatalf("invite: %d %.600s", a.status, a.body)
	}
	if n := f.count(`SELECT count(*) FROM invitations WHERE email = 'rina@melati.test'`); n != 0 {
		t.Fatalf("an invitation was written")
	}
	remove := fmt.Sprintf("/t/toko-bunga-melati/members/%d/remove", rina)
	if a := owner.post(remove, owner.withCSRF(nil), true); a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, "until Jejak staff lift it") {
		t.Fatalf("remove: %d %.600s", a.status, a.body)
	}

	lift := fmt.Sprintf("/admin/tenants/toko-bunga-melati/members/%d/lift", rina)
	sup, adm := f.client(), f.client()
	sup.login("support@jejak.test")
	adm.login("admin@jejak.test")
	if a := sup.get("/admin/tenants/toko-bunga-melati"); strings.Contains(a.body, `data-testid="lift-form"`) {
		t.Fatalf("support is offered the lift")
	}
	if a := sup.post(lift, sup.withCSRF(url.Values{"reason": {"ok"}}), false); a.status != http.StatusForbidden {
		t.Fatalf("support lifting: %d", a.status)
	}
	if a := adm.get("/admin/tenants/toko-bunga-melati"); !strings.Contains(a.body, `data-testid="lift-form"`) {
		t.Fatalf("admin is not offered the lift")
	}
	if a := adm.post(lift, adm.withCSRF(url.Values{"reason": {""}}), false); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("lifting without a reason: %d", a.status)
	}
	if a := adm.post(lift, adm.withCSRF(url.Values{"reason": {"pemilik mengonfirmasi"}}), false); a.status != http.StatusSeeOther {
		t.Fatalf("admin lifting: %d %.300s", a.status, a.body)
	}
	member := f.client()
	member.login("rina@melati.test")
	if a := member.get("/t/toko-bunga-melati/"); a.status != http.StatusOK {
		t.Fatalf("rina after the lift: %d", a.status)
	}
}
