package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestDomainChangesAreAudited checks that each change made through the
// dashboard lands in its tenant's audit trail, in the same transaction, with
// the acting user, and that refused input writes nothing.
func TestDomainChangesAreAudited(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	melati := f.tenantID("toko-bunga-melati")
	events := func(action string) int {
		return f.count(`SELECT count(*) FROM audit_events e JOIN users u ON u.id = e.actor_id
			WHERE e.tenant_id = $1 AND e.action = $2 AND u.email = 'budi@melati.test' AND e.actor_kind = 'user'`, melati, action)
	}

	c := f.client()
	c.login("budi@melati.test")
	if n := events("auth.signin"); n != 1 {
		t.Fatalf("auth.signin events: %d", n)
	}
	home := "/t/toko-bunga-melati/"
	c.post(home+"projects", c.withCSRF(url.Values{"name": {"Dekorasi Kantor"}}), true)
	id := f.projectID("toko-bunga-melati", "Dekorasi Kantor")
	c.post(fmt.Sprintf("%sprojects/%d/delete", home, id), c.withCSRF(nil), true)
	for _, action := range []string{"project.create", "project.delete"} {
		n := f.count(`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = $2 AND entity = 'project'
			AND entity_id = $3 AND detail->>'name' = 'Dekorasi Kantor'`, melati, action, fmt.Sprint(id))
		if n != 1 || events(action) != 1 {
			t.Fatalf("%s: %d matching events", action, n)
		}
	}

	// Plan change: history kept, audited from → to.
	changesBefore := f.count(`SELECT count(*) FROM subscription_changes WHERE tenant_id = $1`, melati)
	a := c.post(home+"plan", c.withCSRF(url.Values{"plan": {"free"}}), true)
	if a.status != http.StatusOK || !strings.Contains(a.body, `data-testid="plan-code">free<`) {
		t.Fatalf("plan change: %d %.300s", a.status, a.body)
	}
	if n := f.count(`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'subscription.change'
		AND detail->>'from_plan' = 'pro' AND detail->>'to_plan' = 'free'`, melati); n != 1 {
		t.Fatalf("subscription.change events: %d", n)
	}
	if n := f.count(`SELECT count(*) FROM subscription_changes WHERE tenant_id = $1`, melati); n != changesBefore+1 {
		t.Fatalf("plan history rows: %d → %d (must append, never overwrite)", changesBefore, n)
	}

	// Invalid plan: 422, nothing written anywhere.
	auditBefore := f.count(`SELECT count(*) FROM audit_events`)
	for _, htmx := range []bool{true, false} {
		a = c.post(home+"plan", c.withCSRF(url.Values{"plan": {"gold"}}), htmx)
		if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `data-testid="plan-error"`) {
			t.Fatalf("invalid plan htmx=%v: %d", htmx, a.status)
		}
	}
	if n := f.count(`SELECT count(*) FROM audit_events`); n != auditBefore {
		t.Fatalf("invalid plan wrote %d audit events", n-auditBefore)
	}
	if n := f.count(`SELECT count(*) FROM subscription_changes WHERE tenant_id = $1`, melati); n != changesBefore+1 {
		t.Fatal("invalid plan wrote plan history")
	}

	// A member cannot change the plan.
	m := f.client()
	m.login("rina@melati.test")
	if a := m.post(home+"plan", m.withCSRF(url.Values{"plan": {"pro"}}), false); a.status != http.StatusForbidden {
		t.Fatalf("member plan change: %d", a.status)
	}
}

func TestSignInFailuresAreAudited(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	senja := f.tenantID("kopi-senja")
	c := f.client()
	c.post("/login", c.withCSRF(url.Values{"email": {"sari@senja.test"}, "password": {"nope"}}), false)
	// Recorded just after the answer (so timing does not tell a known
	// e-mail from an unknown one).
	f.eventually(1, `SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'auth.signin_failed'`, senja)
	// Failures of an unknown e-mail belong to no tenant: nothing stored.
	before := f.count(`SELECT count(*) FROM audit_events`)
	c.post("/login", c.withCSRF(url.Values{"email": {"ghost@senja.test"}, "password": {"nope"}}), false)
	if n := f.count(`SELECT count(*) FROM audit_events`); n != before {
		t.Fatalf("unknown e-mail wrote %d audit events", n-before)
	}
	// Nothing landed in another tenant's trail.
	if n := f.count(`SELECT count(*) FROM audit_events WHERE tenant_id <> $1 AND action LIKE 'auth.%'`, senja); n != 0 {
		t.Fatalf("%d sign-in events in other tenants", n)
	}
}
