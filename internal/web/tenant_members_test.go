package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestMembersPage: owners invite (the mail goes through the mailer, here
// the dev sink), change roles and remove; each change is one audit event
// and tells its sentence; bad input is a 422 that changes nothing;
// members see the list without forms; another tenant's owner gets 404.
func TestMembersPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	melati := f.tenantID("toko-bunga-melati")
	owner := f.client()
	owner.login("budi@melati.test")
	events := func() int {
		return f.count(`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action <> 'auth.signin'`, melati)
	}

	page := owner.get("/t/toko-bunga-melati/members")
	for _, want := range []string{"Budi Santoso", "Rina Wulandari", "Eko Prasetyo", `data-testid="invite-form"`, `data-testid="member-remove"`} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("owner's members page lacks %q", want)
		}
	}

	// Invite: recorded, mailed, listed as pending.
	before := events()
	a := owner.post("/t/toko-bunga-melati/members/invite", owner.withCSRF(url.Values{"email": {" Wati@Example.com "}, "role": {"admin"}}), true)
	if a.status != http.StatusOK || !strings.Contains(a.body, "wati@example.com") || !strings.Contains(a.body, `data-testid="invitation"`) {
		t.Fatalf("invite: %d %.500s", a.status, a.body)
	}
	if n := f.count(`SELECT count(*) FROM mail_messages WHERE tenant_id = $1 AND 'wati@example.com' = ANY(to_addrs) AND subject LIKE 'Budi Santoso invited you to Toko Bunga Melati%'`, melati); n != 1 {
		t.Fatalf("invitation mails in the sink: %d", n)
	}
	if got := events(); got != before+1 {
		t.Fatalf("invite recorded %d events", got-before)
	}

	// Bad input changes nothing.
	before = events()
	invites := f.count(`SELECT count(*) FROM invitations`)
	for _, tc := range []struct {
		form  url.Values
		field string
	}{
		{url.Values{"email": {"not an address"}, "role": {"member"}}, "email"},
		{url.Values{"email": {"x@example.com"}, "role": {"owner"}}, "role"},
		{url.Values{"email": {"wati@example.com"}, "role": {"member"}}, "email"}, // already pending
		{url.Values{"email": {"rina@melati.test"}, "role": {"member"}}, "email"}, // already a member
	} {
		a := owner.post("/t/toko-bunga-melati/members/invite", owner.withCSRF(tc.form), true)
		if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `data-testid="field-error-`+tc.field+`"`) {
			t.Errorf("invite %v: %d %.300s", tc.form, a.status, a.body)
		}
	}
	if events() != before || f.count(`SELECT count(*) FROM invitations`) != invites {
		t.Fatal("refused invitations changed something")
	}

	// Role change and removal, each recorded once; a no-op change is refused.
	eko, rina := f.userID("eko@melati.test"), f.userID("rina@melati.test")
	before = events()
	if a := owner.post(fmt.Sprintf("/t/toko-bunga-melati/members/%d/role", eko), owner.withCSRF(url.Values{"role": {"member"}}), false); a.status != http.StatusSeeOther {
		t.Fatalf("role change: %d", a.status)
	}
	if a := owner.post(fmt.Sprintf("/t/toko-bunga-melati/members/%d/role", eko), owner.withCSRF(url.Values{"role": {"member"}}), true); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("no-op role change: %d", a.status)
	}
	if a := owner.post(fmt.Sprintf("/t/toko-bunga-melati/members/%d/remove", rina), owner.withCSRF(nil), false); a.status != http.StatusSeeOther {
		t.Fatalf("remove: %d", a.status)
	}
	if got := events(); got != before+2 {
		t.Fatalf("role change + removal recorded %d events, want 2", got-before)
	}
	if f.count(`SELECT count(*) FROM memberships WHERE tenant_id = $1 AND user_id = $2`, melati, rina) != 0 {
		t.Fatal("Rina still a member")
	}
	if a := owner.post(fmt.Sprintf("/t/toko-bunga-melati/members/%d/remove", f.userID("budi@melati.test")), owner.withCSRF(nil), true); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("an owner removing themselves: %d", a.status)
	}
	timeline := squash(owner.getLang("/t/toko-bunga-melati/audit", "id").body)
	for _, want := range []string{"mengundang", "wati@example.com", "sebagai admin", "mengeluarkan", "Rina Wulandari", "mengubah peran", "Eko Prasetyo"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("timeline lacks %q", want)
		}
	}

	// A member (Eko, now) sees the list only, and cannot change it.
	eko2 := f.client()
	eko2.login("eko@melati.test")
	ro := eko2.get("/t/toko-bunga-melati/members")
	if ro.status != http.StatusOK || strings.Contains(ro.body, `data-testid="invite-form"`) || strings.Contains(ro.body, `member-remove`) || !strings.Contains(ro.body, "Budi Santoso") {
		t.Fatalf("member's view: %d", ro.status)
	}
	if a := eko2.post("/t/toko-bunga-melati/members/invite", eko2.withCSRF(url.Values{"email": {"y@example.com"}, "role": {"member"}}), false); a.status != http.StatusForbidden {
		t.Fatalf("member inviting: %d", a.status)
	}
	// Another tenant's owner: 404, and nothing of Melati's team leaks.
	sari := f.client()
	sari.login("sari@senja.test")
	if a := sari.get("/t/toko-bunga-melati/members"); a.status != http.StatusNotFound || strings.Contains(a.body, "Budi") {
		t.Fatalf("cross-tenant members: %d", a.status)
	}
	if a := sari.post(fmt.Sprintf("/t/kopi-senja/members/%d/remove", eko), sari.withCSRF(nil), false); a.status != http.StatusNotFound {
		t.Fatalf("removing another tenant's member: %d, want 404", a.status)
	}
}

// TestInvitationAccepted: an owner invites someone who already has an
// account; after signing in they are shown the invitation first, accept it,
// and are a member with the invited role; member.join is in the trail.
// Nobody else can accept it, and it cannot be accepted twice.
func TestInvitationAccepted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	melati := f.tenantID("toko-bunga-melati")
	owner := f.client()
	owner.login("budi@melati.test")
	owner.post("/t/toko-bunga-melati/members/invite", owner.withCSRF(url.Values{"email": {"sari@senja.test"}, "role": {"admin"}}), false)
	id := f.count(`SELECT id FROM invitations WHERE email = 'sari@senja.test'`)

	agus := f.client()
	agus.login("agus@senja.test")
	if a := agus.post(fmt.Sprintf("/invitations/%d/accept", id), agus.withCSRF(nil), false); a.status != http.StatusNotFound {
		t.Fatalf("someone else accepting: %d, want 404", a.status)
	}

	sari := f.client()
	sari.login("sari@senja.test")
	if a := sari.get("/"); a.status != http.StatusSeeOther || a.location != "/invitations" {
		t.Fatalf("start with a pending invitation: %d → %q", a.status, a.location)
	}
	page := sari.getLang("/invitations", "id")
	if !strings.Contains(page.body, "Bergabung dengan Toko Bunga Melati sebagai admin") || !strings.Contains(page.body, "Kopi Senja") {
		t.Fatalf("invitations page: %.600s", page.body)
	}
	if a := sari.post(fmt.Sprintf("/invitations/%d/accept", id), sari.withCSRF(nil), false); a.status != http.StatusSeeOther || a.location != "/t/toko-bunga-melati/" {
		t.Fatalf("accept: %d → %q", a.status, a.location)
	}
	if f.count(`SELECT count(*) FROM memberships WHERE tenant_id = $1 AND user_id = $2 AND role = 'admin'`, melati, f.userID("sari@senja.test")) != 1 {
		t.Fatal("Sari is not an admin of Melati")
	}
	if f.count(`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'member.join'`, melati) != 1 {
		t.Fatal("member.join not recorded")
	}
	if a := sari.post(fmt.Sprintf("/invitations/%d/accept", id), sari.withCSRF(nil), false); a.status != http.StatusNotFound {
		t.Fatalf("accepting twice: %d, want 404", a.status)
	}
	if a := sari.get("/t/toko-bunga-melati/members"); a.status != http.StatusOK {
		t.Fatalf("the new member's view of the team: %d", a.status)
	}
}
