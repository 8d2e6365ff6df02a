package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/staff"
	"github.com/jejakhq/jejak/internal/web"
)

// access is what a role may do on a route.
type access int

const (
	allowed   access = iota // the handler runs (2xx, 3xx other than to /login, or a 4xx validation answer)
	toLogin                 // anonymous: 303 to /login
	forbidden               // 403: known, not allowed
	notFound                // 404: must not even learn the resource exists
	notTheirs               // 404 on the viewer's own route (their name may show in the page's header)
)

var roles = []string{"anonymous", "budi@melati.test", "rina@melati.test", "sari@senja.test", "support@jejak.test", "admin@jejak.test"}

// TestRouteRoleTenantMatrix walks EVERY registered route (a route added
// without an entry here fails the test) for every role: owner and member of
// the tenant in the URL, owner of another tenant, staff and anonymous.
func TestRouteRoleTenantMatrix(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	owner := f.client()
	owner.login("budi@melati.test")
	owner.post("/t/toko-bunga-melati/projects", owner.withCSRF(url.Values{"name": {"Matriks"}}), false)
	project := f.projectID("toko-bunga-melati", "Matriks")
	// The team routes act on people outside the roles below, so no role's
	// own access changes while the matrix runs.
	eko := f.userID("eko@melati.test")
	var leaving int64
	if err := f.db.Admin.QueryRow(context.Background(), `WITH u AS (INSERT INTO users (email, name, password_hash)
		VALUES ('pergi@melati.test', 'Pergi', 'x') RETURNING id)
		INSERT INTO memberships (tenant_id, user_id, role) SELECT $1, id, 'member' FROM u RETURNING user_id`,
		f.tenantID("toko-bunga-melati")).Scan(&leaving); err != nil {
		t.Fatal(err)
	}
	owner.post("/t/toko-bunga-melati/members/invite", owner.withCSRF(url.Values{"email": {"baru@example.com"}, "role": {"member"}}), false)
	invitation := f.count(`SELECT id FROM invitations WHERE email = 'baru@example.com'`)
	owner.post("/t/toko-bunga-melati/members/invite", owner.withCSRF(url.Values{"email": {"tamu@example.com"}, "role": {"member"}}), false)
	// Addressed to nobody in the matrix: accepting it is a 404 for all.
	guestInvitation := f.count(`SELECT id FROM invitations WHERE email = 'tamu@example.com'`)
	hookDel, _ := f.webhookWithDelivery("toko-bunga-melati")
	hook, delivery := f.webhookWithDelivery("toko-bunga-melati")
	f.seal() // the log routes answer for sealed events
	// Each role retries one dead job and discards another (support may
	// retry, only admins discard) and retries one failed outbox message.
	rep := perRoleRepairs(t, f)
	// Two approval requests by a third staff member, so both staff roles
	// may act on them (a request's own author is refused).
	approvalIDs := f.makeApprovals(2)
	rina := f.userID("rina@melati.test")
	token, _, err := audit.NewTokens(f.db.App, nil).Create(context.Background(), f.tenantID("toko-bunga-melati"), f.userID("budi@melati.test"), "matrix")
	if err != nil {
		t.Fatal(err)
	}
	// The project's creation: an event of melati, which another tenant's
	// owner must not be able to read by its id.
	event := f.count(`SELECT max(id) FROM audit_events WHERE action = 'project.create' AND entity_id = $1::bigint::text`, project)
	ids := matrixIDs{event: int64(event), project: project, eko: eko, leaving: leaving, invitation: int64(invitation), guestInvitation: int64(guestInvitation),
		hook: hook, hookDel: hookDel, delivery: delivery, approvals: approvalIDs, rina: rina, token: token.ID}
	rules := tenantMatrixRules(ids)
	for k, r := range staffMatrixRules(ids) {
		rules[k] = r
	}
	runMatrix(t, f, rules, rep)
	checkRepairs(t, f, rep, approvalIDs)
}

// matrixIDs are the rows the matrix routes act on.
type matrixIDs struct {
	project, eko, leaving, invitation, guestInvitation, hook, hookDel, delivery, rina, token, event int64
	approvals                                                                                       []int64
}

// matrixRule is a concrete request for a route and who may make it.
type matrixRule struct {
	path string // concrete path
	form url.Values
	who  map[string]access
}

// tenantRead: any member; tenantWrite: owner/admin only (a member is
// forbidden); staff: support and admin, narrowed for each staff route to
// the roles staff.Can names for its permission (staffRule).
var (
	tenantRead = map[string]access{"anonymous": toLogin, "budi@melati.test": allowed, "rina@melati.test": allowed,
		"sari@senja.test": notFound, "support@jejak.test": notFound, "admin@jejak.test": notFound}
	tenantWrite = map[string]access{"anonymous": toLogin, "budi@melati.test": allowed, "rina@melati.test": forbidden,
		"sari@senja.test": notFound, "support@jejak.test": notFound, "admin@jejak.test": notFound}
	staffOnly = map[string]access{"anonymous": toLogin, "budi@melati.test": forbidden, "rina@melati.test": forbidden,
		"sari@senja.test": forbidden, "support@jejak.test": allowed, "admin@jejak.test": allowed}
	everyone = map[string]access{"anonymous": allowed, "budi@melati.test": allowed, "rina@melati.test": allowed,
		"sari@senja.test": allowed, "support@jejak.test": allowed, "admin@jejak.test": allowed}
	signedIn = map[string]access{"anonymous": toLogin, "budi@melati.test": allowed, "rina@melati.test": allowed,
		"sari@senja.test": allowed, "support@jejak.test": allowed, "admin@jejak.test": allowed}
	nobody = map[string]access{"anonymous": toLogin, "budi@melati.test": notTheirs, "rina@melati.test": notFound,
		"sari@senja.test": notFound, "support@jejak.test": notFound, "admin@jejak.test": notFound}
)

// tenantMatrixRules covers the public, signed-in and tenant routes.
func tenantMatrixRules(ids matrixIDs) map[string]matrixRule {
	return map[string]matrixRule{
		"GET /healthz":                                           {"/healthz", nil, everyone},
		"GET /readyz":                                            {"/readyz", nil, everyone},
		"GET /metrics":                                           {"/metrics", nil, everyone}, // loopback, no token: see metrics_test.go
		"GET /static/*":                                          {"/static/app.css", nil, everyone},
		"GET /robots.txt":                                        {"/robots.txt", nil, everyone},
		"GET /favicon.ico":                                       {"/favicon.ico", nil, everyone},
		"GET /login":                                             {"/login", nil, everyone},
		"POST /login":                                            {"/login", url.Values{"email": {"x@y.test"}, "password": {"x"}}, everyone},
		"POST /logout":                                           {"/logout", nil, everyone},
		"POST /locale":                                           {"/locale", url.Values{"locale": {"id"}}, everyone},
		"GET /":                                                  {"/", nil, signedIn},
		"GET /t/:slug/":                                          {"/t/toko-bunga-melati/", nil, tenantRead},
		"GET /t/:slug":                                           {"/t/toko-bunga-melati", nil, tenantRead},
		"POST /t/:slug/projects":                                 {"/t/toko-bunga-melati/projects", url.Values{"name": {""}}, tenantWrite},
		"POST /t/:slug/projects/:id/delete":                      {fmt.Sprintf("/t/toko-bunga-melati/projects/%d/delete", ids.project), nil, tenantWrite},
		"POST /t/:slug/plan":                                     {"/t/toko-bunga-melati/plan", url.Values{"plan": {"pro"}}, tenantWrite},
		"GET /t/:slug/audit":                                     {"/t/toko-bunga-melati/audit", nil, tenantRead},
		"GET /t/:slug/audit/export.csv":                          {"/t/toko-bunga-melati/audit/export.csv", nil, tenantRead},
		"GET /t/:slug/audit/export.jsonl":                        {"/t/toko-bunga-melati/audit/export.jsonl", nil, tenantRead},
		"POST /t/:slug/audit/verify":                             {"/t/toko-bunga-melati/audit/verify", nil, tenantWrite},
		"GET /audit/key":                                         {"/audit/key", nil, everyone},
		"GET /t/:slug/audit/tokens":                              {"/t/toko-bunga-melati/audit/tokens", nil, tenantWrite},
		"POST /t/:slug/audit/tokens":                             {"/t/toko-bunga-melati/audit/tokens", url.Values{"name": {""}}, tenantWrite},
		"POST /t/:slug/audit/tokens/:id/revoke":                  {fmt.Sprintf("/t/toko-bunga-melati/audit/tokens/%d/revoke", ids.token), nil, tenantWrite},
		"GET /t/:slug/audit/log/checkpoint":                      {"/t/toko-bunga-melati/audit/log/checkpoint", nil, tenantRead},
		"GET /t/:slug/audit/log/proof":                           {"/t/toko-bunga-melati/audit/log/proof?seq=1", nil, tenantRead},
		"GET /t/:slug/audit/log/bundle":                          {"/t/toko-bunga-melati/audit/log/bundle?seq=1", nil, tenantRead},
		"GET /t/:slug/audit/log/consistency":                     {"/t/toko-bunga-melati/audit/log/consistency?from=1&to=2", nil, tenantRead},
		"GET /t/:slug/audit/log/entry":                           {"/t/toko-bunga-melati/audit/log/entry?seq=1", nil, tenantRead},
		"GET /t/:slug/audit/event":                               {fmt.Sprintf("/t/toko-bunga-melati/audit/event?id=%d", ids.event), nil, tenantRead},
		"GET /t/:slug/audit/:entity/:id":                         {fmt.Sprintf("/t/toko-bunga-melati/audit/project/%d", ids.project), nil, tenantRead},
		"GET /t/:slug/jobs":                                      {"/t/toko-bunga-melati/jobs", nil, tenantRead},
		"GET /invitations":                                       {"/invitations", nil, signedIn},
		"POST /invitations/:id/accept":                           {fmt.Sprintf("/invitations/%d/accept", ids.guestInvitation), nil, nobody},
		"GET /t/:slug/members":                                   {"/t/toko-bunga-melati/members", nil, tenantRead},
		"POST /t/:slug/members/invite":                           {"/t/toko-bunga-melati/members/invite", url.Values{"email": {"lagi@example.com"}, "role": {"member"}}, tenantWrite},
		"POST /t/:slug/members/:user_id/role":                    {fmt.Sprintf("/t/toko-bunga-melati/members/%d/role", ids.eko), url.Values{"role": {"member"}}, tenantWrite},
		"POST /t/:slug/members/:user_id/remove":                  {fmt.Sprintf("/t/toko-bunga-melati/members/%d/remove", ids.leaving), nil, tenantWrite},
		"POST /t/:slug/invitations/:id/revoke":                   {fmt.Sprintf("/t/toko-bunga-melati/invitations/%d/revoke", ids.invitation), nil, tenantWrite},
		"GET /t/:slug/billing":                                   {"/t/toko-bunga-melati/billing", nil, tenantWrite},
		"POST /t/:slug/settings/billing-visibility":              {"/t/toko-bunga-melati/settings/billing-visibility", url.Values{"members_see_billing": {"off"}}, tenantWrite},
		"GET /t/:slug/webhooks":                                  {"/t/toko-bunga-melati/webhooks", nil, tenantWrite},
		"POST /t/:slug/webhooks":                                 {"/t/toko-bunga-melati/webhooks", url.Values{"url": {""}, "events": {"*"}}, tenantWrite},
		"GET /t/:slug/webhooks/:id":                              {hookPath(ids.hook), nil, tenantWrite},
		"POST /t/:slug/webhooks/:id/enable":                      {hookPath(ids.hook) + "/enable", nil, tenantWrite},
		"POST /t/:slug/webhooks/:id/disable":                     {hookPath(ids.hook) + "/disable", nil, tenantWrite},
		"POST /t/:slug/webhooks/:id/rotate":                      {hookPath(ids.hook) + "/rotate", nil, tenantWrite},
		"POST /t/:slug/webhooks/:id/delete":                      {hookPath(ids.hookDel) + "/delete", nil, tenantWrite},
		"POST /t/:slug/webhooks/:id/settings":                    {hookPath(ids.hook) + "/settings", url.Values{"rate_limit": {"5"}}, tenantWrite},
		"POST /t/:slug/webhooks/:id/recover":                     {hookPath(ids.hook) + "/recover", url.Values{"hours": {"24"}}, tenantWrite},
		"POST /t/:slug/webhooks/:id/test":                        {hookPath(ids.hook) + "/test", url.Values{"type": {"project.created"}}, tenantWrite},
		"POST /t/:slug/webhooks/:id/deliveries/:delivery/resend": {fmt.Sprintf("%s/deliveries/%d/resend", hookPath(ids.hook), ids.delivery), nil, tenantWrite},
	}
}

func hookPath(id int64) string { return fmt.Sprintf("/t/toko-bunga-melati/webhooks/%d", id) }

// staffMatrixRules covers /admin (who comes from staffRule in runMatrix).
func staffMatrixRules(ids matrixIDs) map[string]matrixRule {
	reason := url.Values{"reason": {"matrix test"}}
	return map[string]matrixRule{
		"GET /admin":                   {"/admin", nil, staffOnly},
		"GET /admin/jobs":              {"/admin/jobs", nil, staffOnly},
		"GET /admin/jobs/:id":          {"/admin/jobs/{dead}", nil, staffOnly},
		"POST /admin/jobs/:id/retry":   {"/admin/jobs/{dead}/retry", url.Values{"reason": {"matrix test"}, "confirm": {"permanent"}}, staffOnly},
		"POST /admin/jobs/:id/discard": {"/admin/jobs/{discard}/discard", reason, staffOnly},
		"GET /admin/dead":              {"/admin/dead", nil, staffOnly},
		"GET /admin/dead/bulk":         {"/admin/dead/bulk?action=retry", nil, staffOnly},
		"POST /admin/dead/bulk":        {"/admin/dead/bulk", url.Values{"action": {"retry"}}, staffOnly},
		"GET /admin/search":            {"/admin/search", nil, staffOnly},
		"GET /admin/alerts":            {"/admin/alerts", nil, staffOnly},
		"GET /admin/tenants":           {"/admin/tenants?q=melati", nil, staffOnly},
		"GET /admin/tenants/:slug":     {"/admin/tenants/toko-bunga-melati", nil, staffOnly},
		"POST /admin/tenants/:slug/members/:user_id/disable": {fmt.Sprintf("/admin/tenants/toko-bunga-melati/members/%d/disable", ids.rina), reason, staffOnly},
		"POST /admin/tenants/:slug/reconcile":                {"/admin/tenants/toko-bunga-melati/reconcile", nil, staffOnly},
		"POST /admin/tenants/:slug/members/:user_id/lift":    {fmt.Sprintf("/admin/tenants/toko-bunga-melati/members/%d/lift", ids.rina), reason, staffOnly},
		"POST /admin/pauses":                                 {"/admin/pauses", url.Values{"scope": {"kind"}, "name": {"matrix.kind"}, "reason": {"matrix"}}, staffOnly},
		"POST /admin/pauses/resume":                          {"/admin/pauses/resume", url.Values{"scope": {"kind"}, "name": {"matrix.kind"}, "reason": {"matrix"}}, staffOnly},
		"GET /admin/approvals":                               {"/admin/approvals", nil, staffOnly},
		"POST /admin/approvals/:id/approve":                  {fmt.Sprintf("/admin/approvals/%d/approve", ids.approvals[0]), nil, staffOnly},
		"POST /admin/approvals/:id/reject":                   {fmt.Sprintf("/admin/approvals/%d/reject", ids.approvals[1]), reason, staffOnly},
		"GET /admin/outbox":                                  {"/admin/outbox", nil, staffOnly},
		"POST /admin/outbox/retry":                           {"/admin/outbox/retry", url.Values{"reason": {"matrix"}, "id": {"{outbox}"}}, staffOnly},
		"POST /admin/timezone":                               {"/admin/timezone", url.Values{"time_zone": {"UTC"}}, staffOnly},
	}
}

// perRoleRepairs makes, per role, a dead job to retry, another to discard
// and a failed outbox message to retry.
func perRoleRepairs(t *testing.T, f *fixture) repairs {
	rep := repairs{dead: map[string]int64{}, discard: map[string]int64{}, outbox: map[string]int64{}}
	for _, r := range roles {
		ids := f.makeDead("toko-bunga-melati", "email.weekly-report", 2, "smtp 550")
		rep.dead[r], rep.discard[r] = ids[0], ids[1]
		var id int64
		if err := f.db.Admin.QueryRow(context.Background(), `INSERT INTO outbox_messages (tenant_id, event_type, aggregate_type,
			aggregate_id, payload, created_at, available_at, state, attempts, last_error)
			VALUES ($1, 'project.deleted', 'project', '77', '{}'::jsonb, now(), now(), 'failed', 5, 'nats: <timeout>') RETURNING id`,
			f.tenantID("toko-bunga-melati")).Scan(&id); err != nil {
			t.Fatal(err)
		}
		rep.outbox[r] = id
	}
	return rep
}

// repairs are the per-role targets of the staff repair routes.
type repairs struct{ dead, discard, outbox map[string]int64 }

// runMatrix makes every registered route's request as every role.
func runMatrix(t *testing.T, f *fixture, rules map[string]matrixRule, rep repairs) {
	t.Helper()
	e := newHandler(f.db, f.jobs, quietLog(), 0).(*echo.Echo)
	clientAs := roleSessions(f)
	seen := map[string]bool{}
	for _, r := range e.Routes() {
		key := r.Method + " " + r.Path
		if seen[key] || r.Method == echo.RouteNotFound {
			continue
		}
		seen[key] = true
		rule, ok := rules[key]
		if !ok {
			t.Errorf("route %s has no access rule in this test: add one", key)
			continue
		}
		if strings.HasPrefix(r.Path, "/admin") {
			perm, ok := web.StaffPermission(r.Method, r.Path)
			if !ok {
				t.Errorf("staff route %s needs no permission in staffPermissions: add one", key)
				continue
			}
			rule.who = staffRule(perm)
		}
		for _, role := range roles {
			t.Run(key+" as "+role, func(t *testing.T) {
				c := clientAs(role, key)
				path := strings.ReplaceAll(rule.path, "{dead}", fmt.Sprint(rep.dead[role]))
				path = strings.ReplaceAll(path, "{discard}", fmt.Sprint(rep.discard[role]))
				var a answer
				if r.Method == http.MethodGet {
					a = c.get(path)
				} else {
					form := cloneValues(rule.form)
					if form.Get("id") == "{outbox}" {
						form.Set("id", fmt.Sprint(rep.outbox[role]))
					}
					a = c.post(path, c.withCSRF(form), false)
				}
				checkAccess(t, rule.who[role], a, path)
			})
		}
	}
	for key := range rules {
		if !seen[key] {
			t.Errorf("rule for %s matches no registered route", key)
		}
	}
}

// checkRepairs: staff actions never reached a job they were not allowed
// to touch; support retried its job but could not discard the other one,
// and its refused decisions left both approvals for the admin.
func checkRepairs(t *testing.T, f *fixture, rep repairs, approvalIDs []int64) {
	t.Helper()
	for _, role := range roles {
		if role != "support@jejak.test" && role != "admin@jejak.test" {
			if st := f.jobState(rep.dead[role]); st != string(job.StateDead) {
				t.Errorf("%s's retry changed dead job %d to %s", role, rep.dead[role], st)
			}
		}
		if role != "admin@jejak.test" {
			if st := f.jobState(rep.discard[role]); st != string(job.StateDead) {
				t.Errorf("%s's discard changed dead job %d to %s", role, rep.discard[role], st)
			}
		}
	}
	if st := f.jobState(rep.dead["support@jejak.test"]); st == string(job.StateDead) {
		t.Errorf("support's retry left job %d dead", rep.dead["support@jejak.test"])
	}
	for _, id := range approvalIDs {
		if n := f.count(`SELECT count(*) FROM approvals WHERE id = $1 AND decided_by = $2`, id, f.userID("support@jejak.test")); n != 0 {
			t.Errorf("support decided approval %d", id)
		}
	}
}

// staffRule is who may call a staff route that needs perm: staff whose
// role holds it (staff.Can); other staff are refused (403), as is everyone
// else signed in; anonymous visitors go to sign-in.
func staffRule(perm staff.Permission) map[string]access {
	who := map[string]access{"anonymous": toLogin, "budi@melati.test": forbidden, "rina@melati.test": forbidden,
		"sari@senja.test": forbidden}
	for _, r := range []struct{ email, role string }{{"support@jejak.test", staff.RoleSupport}, {"admin@jejak.test", staff.RoleAdmin}} {
		who[r.email] = forbidden
		if staff.Can(r.role, perm) {
			who[r.email] = allowed
		}
	}
	return who
}

func checkAccess(t *testing.T, want access, a answer, path string) {
	t.Helper()
	switch want {
	case toLogin:
		if a.status != http.StatusSeeOther || a.location != "/login" {
			t.Fatalf("got %d → %q, want 303 to /login", a.status, a.location)
		}
	case forbidden:
		if a.status != http.StatusForbidden {
			t.Fatalf("got %d, want 403", a.status)
		}
	case notFound:
		if a.status != http.StatusNotFound {
			t.Fatalf("got %d, want 404", a.status)
		}
		for _, leak := range []string{"Toko Bunga Melati", "Matriks", "Budi Santoso"} {
			if strings.Contains(a.body, leak) {
				t.Fatalf("404 page leaks %q", leak)
			}
		}
	case notTheirs:
		if a.status != http.StatusNotFound {
			t.Fatalf("got %d, want 404", a.status)
		}
	case allowed:
		// Sign-out legitimately sends everyone to /login; anywhere else
		// that redirect means the session was not accepted.
		sentAway := a.status == http.StatusSeeOther && a.location == "/login" && path != "/logout"
		if a.status == http.StatusForbidden || a.status == http.StatusNotFound || a.status >= 500 || sentAway {
			t.Fatalf("got %d → %q, want the handler to run: %.300s", a.status, a.location, a.body)
		}
	}
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// roleSessions returns a client signed in as role for the route key: one
// sign-in per role (argon2id hashing is slow on purpose, and was most of
// this test's time), shared by cookie, except for the routes that change
// the session itself.
func roleSessions(f *fixture) func(role, key string) *client {
	ownSession := map[string]bool{"POST /login": true, "POST /logout": true, "POST /locale": true}
	shared := map[string]*client{}
	return func(role, key string) *client {
		c := f.client()
		if role == "anonymous" {
			return c
		}
		if ownSession[key] {
			c.login(role)
			return c
		}
		s, ok := shared[role]
		if !ok {
			s = f.client()
			s.login(role)
			shared[role] = s
		}
		u, err := url.Parse(f.srv.URL)
		if err != nil {
			f.t.Fatal(err)
		}
		c.http.Jar.SetCookies(u, s.http.Jar.Cookies(u))
		return c
	}
}
