package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
)

// TestAdminRoutesByRole: every staff route admits admins, and support
// staff unless it is admin-only (discard, bulk: 403); refuses tenant
// owners and members (403) and sends anonymous visitors to the sign-in
// page.
func TestAdminRoutesByRole(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	dead := f.makeDead("toko-bunga-melati", "email.weekly-report", 1, "smtp 550")[0]
	id := fmt.Sprint(dead)
	routes := []struct {
		method, path string
		form         url.Values
		staffStatus  int
		adminOnly    bool
	}{
		{"GET", "/admin", nil, 200, false},
		{"GET", "/admin?partial=overview", nil, 200, false},
		{"GET", "/admin/jobs", nil, 200, false},
		{"GET", "/admin/jobs/" + id, nil, 200, false},
		{"GET", "/admin/dead", nil, 200, false},
		{"GET", "/admin/dead/bulk?action=retry", nil, 200, true},
		{"GET", "/admin/search?trace=abc", nil, 200, false},
		// Staff pass the guard and are refused for the missing reason.
		{"POST", "/admin/jobs/" + id + "/retry", url.Values{"reason": {""}}, 422, false},
		{"POST", "/admin/jobs/" + id + "/discard", url.Values{"reason": {" "}}, 422, true},
		{"POST", "/admin/dead/bulk", url.Values{"action": {"retry"}, "max_id": {id}, "reason": {""}}, 422, true},
	}
	roles := []struct {
		name, email string
		status      int // 0 = staff status of the route
		location    string
	}{
		{"anonymous", "", http.StatusSeeOther, "/login"},
		{"owner", "budi@melati.test", http.StatusForbidden, ""},
		{"member", "rina@melati.test", http.StatusForbidden, ""},
		{"support", "support@jejak.test", 0, ""},
		{"admin", "admin@jejak.test", 0, ""},
	}
	for _, role := range roles {
		c := f.client()
		if role.email != "" {
			c.login(role.email)
		}
		for _, r := range routes {
			t.Run(role.name+" "+r.method+" "+r.path, func(t *testing.T) {
				var a answer
				if r.method == "GET" {
					a = c.get(r.path)
				} else {
					form := url.Values{}
					for k, v := range r.form {
						form[k] = v
					}
					a = c.post(r.path, c.withCSRF(form), false)
				}
				want := role.status
				if want == 0 {
					want = r.staffStatus
				}
				if role.name == "support" && r.adminOnly {
					want = http.StatusForbidden
				}
				if a.status != want || (role.location != "" && a.location != role.location) {
					t.Fatalf("got %d %q, want %d %q; body %.300s", a.status, a.location, want, role.location, a.body)
				}
			})
		}
	}
	if st := f.jobState(dead); st != "dead" {
		t.Fatalf("refused requests changed the job: %s", st)
	}
}

// TestAdminOverviewMatchesDatabase drives jobs through the engine by hand
// and checks the overview's counters against the database; a second server
// with a long max age keeps serving its first snapshot (the cache works).
func TestAdminOverviewMatchesDatabase(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	cached := f.client()
	cachedSrv := newCachedServer(t, f, time.Hour)
	c := f.client()
	c.login("support@jejak.test")
	cached.login("support@jejak.test")

	for i := 0; i < 4; i++ {
		f.enqueue("toko-bunga-melati", job.EnqueueParams{Kind: "email.weekly-report"})
	}
	for i := 0; i < 2; i++ {
		f.enqueue("kopi-senja", job.EnqueueParams{Kind: "points.award"})
	}
	future := time.Now().Add(time.Hour)
	f.enqueue("kopi-senja", job.EnqueueParams{Kind: "points.award", AvailableAt: &future})
	// Until the maintenance leader counts the jobs scheduled ahead, "due
	// now" is every pending job, and the page says so.
	if p := c.get("/admin?partial=overview"); counters(p.body)["count-due"] != "7" || !strings.Contains(p.body, "not counted yet") {
		t.Fatalf("before the count: %v %.1500s", counters(p.body), p.body)
	}
	if err := job.CountScheduled(context.Background(), f.db.System, nil); err != nil {
		t.Fatal(err)
	}
	first := cachedSrv.get("/admin")
	before := counters(first.body)
	if before["count-pending"] != "7" || before["count-due"] != "6" || !strings.Contains(first.body, "as counted at") {
		t.Fatalf("first snapshot: %v", before)
	}

	js := f.claimAll("w1") // the 6 due ones
	if len(js) != 6 {
		t.Fatalf("claimed %d", len(js))
	}
	f.complete("w1", js[0])
	f.complete("w1", js[1])
	f.fail("w1", js[2], job.Permanent(errors.New("smtp 550")))
	f.fail("w1", js[3], errors.New("timeout")) // transient: pending again, due now

	a := c.get("/admin?partial=overview")
	if a.status != 200 || strings.Contains(a.body, "<html") {
		t.Fatalf("partial: %d (full page=%v)", a.status, strings.Contains(a.body, "<html"))
	}
	got := counters(a.body)
	want := map[string]string{
		"count-pending":   fmt.Sprint(f.count(`SELECT count(*) FROM jobs WHERE state = 'pending'`)),
		"count-due":       fmt.Sprint(f.count(`SELECT count(*) FROM jobs WHERE state = 'pending' AND available_at <= now()`)),
		"count-running":   fmt.Sprint(f.count(`SELECT count(*) FROM jobs WHERE state = 'running'`)),
		"count-dead":      fmt.Sprint(f.count(`SELECT count(*) FROM jobs WHERE state = 'dead'`)),
		"count-succeeded": fmt.Sprint(f.count(`SELECT count(*) FROM jobs WHERE state = 'succeeded'`)),
		"count-failed":    "2",
	}
	if want["count-pending"] != "2" || want["count-running"] != "2" || want["count-dead"] != "1" || want["count-succeeded"] != "2" {
		t.Fatalf("unexpected database state %v", want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, database says %q", k, got[k], v)
		}
	}
	if !contains(a.body, `hx-trigger="every 3s"`, `hx-get="/admin?partial=overview"`, `data-testid="overview-age"`, "<svg", "<rect") {
		t.Errorf("partial lacks polling, freshness or chart: %.2000s", a.body)
	}
	if strings.Contains(a.body, "style=") {
		t.Error("inline style in the overview")
	}
	// Per tenant and per kind rows exist.
	if !contains(a.body, `data-key="toko-bunga-melati"`, `data-key="kopi-senja"`, `data-key="points.award"`) {
		t.Errorf("group tables incomplete")
	}
	// Failure rate: 2 failed of 4 finished attempts.
	if !strings.Contains(a.body, `data-testid="failure-rate">50.0%`) {
		t.Errorf("failure rate not 50%%")
	}
	// The long-lived cache still shows its first snapshot.
	if again := counters(cachedSrv.get("/admin?partial=overview").body); again["count-pending"] != "7" {
		t.Errorf("cache with max age 1h refreshed: %v", again)
	}
}

type cachedServer struct {
	c *client
}

func (s cachedServer) get(path string) answer { return s.c.get(path) }

// newCachedServer runs a second dashboard over f's database with its own
// overview cache, signed in as support.
func newCachedServer(t *testing.T, f *fixture, maxAge time.Duration) cachedServer {
	t.Helper()
	g := *f
	g.srv = httptestServer(t, newHandler(f.db, f.jobs, quietLog(), maxAge))
	c := g.client()
	c.login("support@jejak.test")
	return cachedServer{c: c}
}

// TestAdminJobListFiltersAndSearch covers every filter, payload
// containment, keyset paging and refusals of bad input.
func TestAdminJobListFiltersAndSearch(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	melati, senja := f.tenantID("toko-bunga-melati"), f.tenantID("kopi-senja")
	dead := f.makeDead("toko-bunga-melati", "email.weekly-report", 1, "smtp 550")[0]
	a1 := f.enqueue("toko-bunga-melati", job.EnqueueParams{Kind: "points.award", Queue: "bulk",
		Payload:        []byte(fmt.Sprintf(`{"tenant_id": %d, "user_id": 42, "vip": true, "note": "42", "who": {"name": "Budi <b>"}}`, melati)),
		IdempotencyKey: "award-42", TraceID: "trace-aaa"})
	b1 := f.enqueue("kopi-senja", job.EnqueueParams{Kind: "points.award",
		Payload: []byte(fmt.Sprintf(`{"tenant_id": %d, "user_id": 7, "vip": false}`, senja)), TraceID: "trace-bbb"})
	c := f.client()
	c.login("support@jejak.test")

	cases := []struct {
		query   string
		in, out []int64
	}{
		{"", []int64{dead, a1, b1}, nil},
		{"state=dead", []int64{dead}, []int64{a1, b1}},
		{"state=pending&kind=points.award", []int64{a1, b1}, []int64{dead}},
		{"tenant=kopi-senja", []int64{b1}, []int64{a1, dead}},
		{"queue=bulk", []int64{a1}, []int64{b1, dead}},
		{"id=" + fmt.Sprint(b1), []int64{b1}, []int64{a1, dead}},
		{"trace=trace-aaa", []int64{a1}, []int64{b1}},
		{"key=award-42", []int64{a1}, []int64{b1}},
		{"payload=user_id%3D42", []int64{a1}, []int64{b1}},
		{"payload=vip%3Dfalse", []int64{b1}, []int64{a1}},
		{"payload=note%3D%2242%22", []int64{a1}, []int64{b1}},
		{"payload=note%3D42", nil, []int64{a1, b1}}, // 42 is a number, note holds a string
		{"payload=who.name%3DBudi+%3Cb%3E", []int64{a1}, []int64{b1}},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			a := c.get("/admin/jobs?" + tc.query)
			if a.status != 200 {
				t.Fatalf("status %d: %.300s", a.status, a.body)
			}
			ids := jobIDsIn(a.body, "job-row")
			for _, id := range tc.in {
				if !has(ids, id) {
					t.Errorf("job %d missing from %v", id, ids)
				}
			}
			for _, id := range tc.out {
				if has(ids, id) {
					t.Errorf("job %d should be filtered out of %v", id, ids)
				}
			}
		})
	}
	// htmx asks for the results only.
	req, _ := http.NewRequest("GET", f.srv.URL+"/admin/jobs?state=dead", nil)
	req.Header.Set("HX-Request", "true")
	req.Header.Set("HX-Target", "jobs-results")
	if a := c.do(req); a.status != 200 || strings.Contains(a.body, "<html") || !strings.Contains(a.body, `id="jobs-results"`) {
		t.Errorf("htmx partial: %d %.200s", a.status, a.body)
	}

	bad := []struct {
		query, field string
		status       int
	}{
		{"state=bogus", "Unknown state", 422},
		{"tenant=nope", "Unknown tenant", 422},
		{"id=abc", "positive number", 422},
		{"id=-3", "positive number", 422},
		{"payload=garbage", "field=value", 422},
		{"payload=%3D1", "field=value", 422},
		{"payload=a%20b%3D1", "field name", 422},
		{"payload=x%3D%22unterminated", "quoted value", 422},
		{"before=abc", "cursor", 400},
		{"before=-1", "cursor", 400},
		{"trace=" + strings.Repeat("x", 201), "at most 200", 422},
	}
	for _, tc := range bad {
		t.Run("bad "+tc.query, func(t *testing.T) {
			a := c.get("/admin/jobs?" + tc.query)
			if a.status != tc.status || !strings.Contains(a.body, tc.field) {
				t.Fatalf("got %d, want %d with %q: %.500s", a.status, tc.status, tc.field, a.body)
			}
		})
	}
}

func TestAdminJobListKeysetPages(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	for i := 0; i < 60; i++ {
		f.enqueue("kopi-senja", job.EnqueueParams{})
	}
	c := f.client()
	c.login("admin@jejak.test")
	first := c.get("/admin/jobs?tenant=kopi-senja")
	ids1 := jobIDsIn(first.body, "job-row")
	m := regexpOlder.FindStringSubmatch(first.body)
	if len(ids1) != 50 || m == nil {
		t.Fatalf("first page: %d rows, older link %v", len(ids1), m != nil)
	}
	second := c.get(strings.ReplaceAll(m[1], "&amp;", "&"))
	ids2 := jobIDsIn(second.body, "job-row")
	if len(ids2) != 10 || regexpOlder.MatchString(second.body) {
		t.Fatalf("second page: %d rows (want 10, no older link)", len(ids2))
	}
	seen := map[string]bool{}
	for _, id := range append(ids1, ids2...) {
		if seen[id] {
			t.Fatalf("job %s on both pages", id)
		}
		seen[id] = true
	}
	var newest, oldest int64
	fmt.Sscan(ids1[0], &newest)
	fmt.Sscan(ids2[len(ids2)-1], &oldest)
	if newest <= oldest {
		t.Fatalf("not newest first: %d then %d", newest, oldest)
	}
}

// TestAdminJobDetail shows payload (escaped), metadata, the attempt
// history and related audit events; bad ids are 404.
func TestAdminJobDetail(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	ctx := context.Background()
	melati := f.tenantID("toko-bunga-melati")
	id := f.enqueue("toko-bunga-melati", job.EnqueueParams{
		Payload: []byte(fmt.Sprintf(`{"tenant_id": %d, "subject": "<script>alert(1)</script>"}`, melati)),
		TraceID: "trace-detail-1", IdempotencyKey: "weekly-2026-48",
	})
	js := f.claimAll("worker-a")
	f.fail("worker-a", js[0], errors.New("connection refused"))
	js = f.claimAll("worker-b")
	f.fail("worker-b", js[0], job.Permanent(errors.New("smtp 550 mailbox unavailable")))
	// An audit event of the job and one of its trace (the request).
	err := database.InTx(ctx, f.db.System, func(tx pgx.Tx) error {
		rec := audit.NewRecorder(nil)
		if err := rec.RecordJobEvent(ctx, tx, audit.JobEvent{TenantID: melati, JobID: id, Kind: "email.weekly-report",
			Stage: audit.JobDeadLettered, Attempt: 2, TraceID: "trace-detail-1", Reason: "permanent"}); err != nil {
			return err
		}
		uid := f.userID("budi@melati.test")
		_, err := rec.Record(ctx, tx, audit.Event{TenantID: melati, ActorKind: audit.ActorUser, ActorID: &uid,
			Action: "report.request", Entity: "report", EntityID: "weekly", TraceID: "trace-detail-1"})
		return err
	})
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	c := f.client()
	c.login("support@jejak.test")
	a := c.get(fmt.Sprintf("/admin/jobs/%d", id))
	if a.status != 200 {
		t.Fatalf("detail: %d", a.status)
	}
	if strings.Contains(a.body, "<script>alert") || !strings.Contains(a.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("payload not escaped")
	}
	if !contains(a.body, "trace-detail-1", "weekly-2026-48", "toko-bunga-melati", "2 of 3", `data-testid="job-actions"`) {
		t.Errorf("metadata incomplete: %.3000s", a.body)
	}
	if n := strings.Count(a.body, `data-testid="attempt"`); n != 2 {
		t.Errorf("attempt history has %d rows, want 2", n)
	}
	if !contains(a.body, "worker-a", "connection refused", "worker-b", "smtp 550 mailbox unavailable") {
		t.Error("attempt history lacks workers or errors")
	}
	if !contains(a.body, `data-action="job.dead_lettered"`, `data-action="report.request"`, "Budi") {
		t.Error("related audit events (by job and by trace) missing")
	}
	var hash []byte
	_ = f.db.Admin.QueryRow(ctx, `SELECT payload_hash FROM jobs WHERE id = $1`, id).Scan(&hash)
	if !strings.Contains(a.body, fmt.Sprintf("%x", hash)) {
		t.Error("payload hash hex missing")
	}
	for _, p := range []string{"/admin/jobs/abc", "/admin/jobs/0", "/admin/jobs/999999999", "/admin/jobs/1e3"} {
		if a := c.get(p); a.status != 404 {
			t.Errorf("%s: %d, want 404", p, a.status)
		}
	}
}

// TestAdminDeadRetryAndDiscard: single retry and discard need a reason,
// change only dead jobs, land in the job's own tenant's trail with the
// staff actor and reason, and never in another tenant's.
func TestAdminDeadRetryAndDiscard(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	ids := f.makeDead("toko-bunga-melati", "email.weekly-report", 2, "smtp 550 mailbox unavailable")
	other := f.makeDead("kopi-senja", "email.weekly-report", 1, "smtp 550")[0]
	staffID := f.userID("admin@jejak.test")
	c := f.client()
	c.login("admin@jejak.test")

	page := c.get("/admin/dead")
	if !contains(page.body, `data-testid="dead-group"`, `data-kind="email.weekly-report"`, `data-class="permanent"`) ||
		!strings.Contains(page.body, `data-col="count">3<`) {
		t.Fatalf("groups summary wrong: %.3000s", page.body)
	}
	if rows := jobIDsIn(page.body, "dead-row"); len(rows) != 3 {
		t.Fatalf("dead list has %d rows", len(rows))
	}

	// No reason, or a blank one: 422 next to the field, nothing changed.
	for _, reason := range []string{"", "   "} {
		a := c.post(fmt.Sprintf("/admin/jobs/%d/retry", ids[0]), c.withCSRF(url.Values{"reason": {reason}, "back": {"/admin/dead"}}), true)
		if a.status != 422 || !contains(a.body, `data-testid="field-error"`, "reason is required", `data-testid="dead-row"`) {
			t.Fatalf("retry without reason: %d %.500s", a.status, a.body)
		}
	}
	// Without JavaScript the whole page comes back with the message.
	a := c.post(fmt.Sprintf("/admin/jobs/%d/retry", ids[0]), c.withCSRF(url.Values{"reason": {""}, "back": {"/admin/dead"}}), false)
	if a.status != 422 || !contains(a.body, "<html", "reason is required") {
		t.Fatalf("no-JS retry without reason: %d", a.status)
	}
	if f.jobState(ids[0]) != "dead" || len(f.trail("toko-bunga-melati", "job.replayed")) != 0 {
		t.Fatal("a refused retry changed something")
	}

	// Retry with a reason (htmx): the row is replaced, the job is pending
	// with its history, the event is in melati's trail only.
	a = c.post(fmt.Sprintf("/admin/jobs/%d/retry", ids[0]), c.withCSRF(url.Values{"reason": {"SMTP relay fixed, OPS-12"}, "back": {"/admin/dead"}, "confirm": {"permanent"}}), true)
	if a.status != 200 || !contains(a.body, `data-testid="dead-row-done"`, "toko-bunga-melati") || strings.Contains(a.body, "<html") {
		t.Fatalf("retry: %d %.500s", a.status, a.body)
	}
	var attempt, maxAttempts int
	var flagged bool
	var errs int
	err := f.db.Admin.QueryRow(context.Background(), `SELECT attempt, max_attempts, flagged, jsonb_array_length(errors) FROM jobs WHERE id = $1`, ids[0]).
		Scan(&attempt, &maxAttempts, &flagged, &errs)
	if err != nil || f.jobState(ids[0]) != "pending" || attempt != 1 || maxAttempts != 4 || flagged || errs != 1 {
		t.Fatalf("after retry: state=%s attempt=%d max=%d flagged=%v history=%d err=%v", f.jobState(ids[0]), attempt, maxAttempts, flagged, errs, err)
	}
	ev := f.trail("toko-bunga-melati", "job.replayed")
	if len(ev) != 1 || ev[0].ActorKind != audit.ActorStaff || ev[0].ActorID == nil || *ev[0].ActorID != staffID ||
		detailReason(t, ev[0]) != "SMTP relay fixed, OPS-12" || ev[0].JobID == nil || *ev[0].JobID != ids[0] || ev[0].TraceID == "" {
		t.Fatalf("melati's trail: %+v", ev)
	}
	if n := len(f.trail("kopi-senja", "job.replayed")); n != 0 {
		t.Fatalf("kopi-senja's trail got %d replay events for melati's job", n)
	}
	// A second retry of the same job: no longer dead, nothing doubles.
	a = c.post(fmt.Sprintf("/admin/jobs/%d/retry", ids[0]), c.withCSRF(url.Values{"reason": {"again"}, "back": {"/admin/dead"}}), true)
	if a.status != 200 || !strings.Contains(a.body, "no longer a dead letter") || len(f.trail("toko-bunga-melati", "job.replayed")) != 1 {
		t.Fatalf("double retry: %d %.300s", a.status, a.body)
	}

	// Discard without JavaScript: redirect back with a flash.
	a = c.post(fmt.Sprintf("/admin/jobs/%d/discard", ids[1]), c.withCSRF(url.Values{"reason": {"customer closed account"}, "back": {"/admin/dead?kind=email.weekly-report"}}), false)
	if a.status != http.StatusSeeOther || a.location != "/admin/dead?kind=email.weekly-report" {
		t.Fatalf("discard: %d %q", a.status, a.location)
	}
	if f.jobState(ids[1]) != "cancelled" {
		t.Fatalf("discarded job is %s", f.jobState(ids[1]))
	}
	if ev := f.trail("toko-bunga-melati", "job.discarded"); len(ev) != 1 || detailReason(t, ev[0]) != "customer closed account" {
		t.Fatalf("discard event: %+v", ev)
	}
	after := c.get(a.location)
	if !strings.Contains(after.body, `data-testid="flash"`) || has(jobIDsIn(after.body, "dead-row"), ids[1]) || !has(jobIDsIn(after.body, "dead-row"), other) {
		t.Fatalf("dead list after discard: %.2000s", after.body)
	}
	// An open redirect through back is refused.
	a = c.post(fmt.Sprintf("/admin/jobs/%d/retry", other), c.withCSRF(url.Values{"reason": {"ok"}, "back": {"//evil.example/"}, "confirm": {"permanent"}}), false)
	if a.status != http.StatusSeeOther || a.location != fmt.Sprintf("/admin/jobs/%d", other) {
		t.Fatalf("back not sanitised: %q", a.location)
	}
	if ev := f.trail("kopi-senja", "job.replayed"); len(ev) != 1 || *ev[0].JobID != other {
		t.Fatalf("kopi-senja's own retry: %+v", ev)
	}
	// Unknown job: 404.
	if a := c.post("/admin/jobs/999999/retry", c.withCSRF(url.Values{"reason": {"x"}}), false); a.status != 404 {
		t.Fatalf("unknown job: %d", a.status)
	}
}

// TestAdminDeadBulk: the preview's count equals what the confirmed bulk
// action changes; a reason is required; a job that died after the preview
// is not touched; each tenant's trail gets its own jobs' events.
func TestAdminDeadBulk(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	melati := f.makeDead("toko-bunga-melati", "email.weekly-report", 4, "smtp 550")
	senja := f.makeDead("kopi-senja", "email.weekly-report", 2, "smtp 550")
	otherKind := f.makeDead("kopi-senja", "points.award", 1, "bad payload")[0]
	c := f.client()
	c.login("admin@jejak.test")

	prev := c.get("/admin/dead/bulk?action=retry&kind=email.weekly-report")
	m := regexpBulk.FindStringSubmatch(prev.body)
	if prev.status != 200 || m == nil || m[1] != "6" || !strings.Contains(prev.body, "Retry 6 dead jobs matching kind=email.weekly-report") {
		t.Fatalf("preview: %d %.2000s", prev.status, prev.body)
	}
	maxID := regexpMaxID.FindStringSubmatch(prev.body)[1]
	late := f.makeDead("toko-bunga-melati", "email.weekly-report", 1, "smtp 550")[0]

	form := url.Values{"action": {"retry"}, "kind": {"email.weekly-report"}, "max_id": {maxID}}
	for _, reason := range []string{"", "  "} {
		form.Set("reason", reason)
		a := c.post("/admin/dead/bulk", c.withCSRF(form), false)
		if a.status != 422 || !contains(a.body, "reason is required", "Retry") {
			t.Fatalf("bulk without reason: %d %.300s", a.status, a.body)
		}
	}
	if n := f.count(`SELECT count(*) FROM jobs WHERE state = 'dead'`); n != 8 {
		t.Fatalf("refused bulk changed jobs: %d dead", n)
	}
	form.Set("reason", "relay fixed")
	a := c.post("/admin/dead/bulk", c.withCSRF(form), false)
	if a.status != http.StatusSeeOther || a.location != "/admin/dead?kind=email.weekly-report" {
		t.Fatalf("bulk: %d %q %.300s", a.status, a.location, a.body)
	}
	changed := f.count(`SELECT count(*) FROM jobs WHERE id = ANY($1) AND state = 'pending'`, append(append([]int64{}, melati...), senja...))
	if changed != 6 {
		t.Fatalf("bulk changed %d of the 6 previewed", changed)
	}
	if f.jobState(late) != "dead" || f.jobState(otherKind) != "dead" {
		t.Fatal("bulk touched a job outside its preview")
	}
	if n := len(f.trail("toko-bunga-melati", "job.replayed")); n != 4 {
		t.Errorf("melati trail: %d replay events, want 4", n)
	}
	if n := len(f.trail("kopi-senja", "job.replayed")); n != 2 {
		t.Errorf("senja trail: %d replay events, want 2", n)
	}
	if flash := c.get(a.location); !strings.Contains(flash.body, "Retried 6 dead jobs") {
		t.Errorf("flash missing: %.1000s", flash.body)
	}
	// Discard the rest of one tenant: preview then confirm.
	prev = c.get("/admin/dead/bulk?action=discard&tenant=kopi-senja")
	if m := regexpBulk.FindStringSubmatch(prev.body); m == nil || m[1] != "1" {
		t.Fatalf("discard preview: %.1000s", prev.body)
	}
	// Bad bulk inputs.
	for _, q := range []string{"action=explode", "action=retry&class=weird", "action=retry&tenant=nope", "action=retry&flagged=maybe"} {
		if a := c.get("/admin/dead/bulk?" + q); a.status < 400 || a.status >= 500 {
			t.Errorf("%s: %d", q, a.status)
		}
	}
	if a := c.post("/admin/dead/bulk", c.withCSRF(url.Values{"action": {"retry"}, "max_id": {"x"}, "reason": {"r"}}), false); a.status != 400 {
		t.Errorf("bad max_id: %d", a.status)
	}
}

// TestAdminTraceSearch finds one trace's jobs and audit events across two
// tenants; bad trace ids are refused next to the field.
func TestAdminTraceSearch(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	ctx := context.Background()
	const trace = "0af7651916cd43dd8448eb211c80319c"
	a := f.enqueue("toko-bunga-melati", job.EnqueueParams{TraceID: trace})
	b := f.enqueue("kopi-senja", job.EnqueueParams{Kind: "points.award", TraceID: trace})
	f.enqueue("kopi-senja", job.EnqueueParams{TraceID: "another-trace"})
	for _, slug := range []string{"toko-bunga-melati", "kopi-senja"} {
		tid := f.tenantID(slug)
		err := database.InTenantTx(ctx, f.db.App, tid, func(tx pgx.Tx) error {
			_, err := audit.NewRecorder(nil).Record(ctx, tx, audit.Event{TenantID: tid, ActorKind: audit.ActorSystem,
				Action: "sync.run", Entity: "sync", EntityID: slug, TraceID: trace})
			return err
		})
		if err != nil {
			t.Fatalf("audit: %v", err)
		}
	}
	c := f.client()
	c.login("admin@jejak.test")
	res := c.get("/admin/search?trace=" + trace)
	if res.status != 200 {
		t.Fatalf("search: %d", res.status)
	}
	jobs := jobIDsIn(res.body, "trace-job")
	if len(jobs) != 2 || !has(jobs, a) || !has(jobs, b) {
		t.Fatalf("trace jobs: %v", jobs)
	}
	if n := strings.Count(res.body, `data-action="sync.run"`); n != 2 || !contains(res.body, "toko-bunga-melati", "kopi-senja") {
		t.Fatalf("trace audit events: %d", n)
	}
	for _, q := range []string{"trace=", "trace=%20", "trace=%3Cscript%3E", "trace=" + strings.Repeat("a", 201)} {
		if a := c.get("/admin/search?" + q); a.status != 422 || !strings.Contains(a.body, `data-testid="field-error"`) {
			t.Errorf("%s: %d", q, a.status)
		}
	}
	if a := c.get("/admin/search"); a.status != 200 || strings.Contains(a.body, "field-error") {
		t.Errorf("empty form: %d", a.status)
	}
}

// TestAdminShowsUnsealedAuditEvents: /admin lists each tenant whose audit
// events wait for the sealer, with how many and how long the oldest has
// waited (flagged past audit.SealingBehind); once sealed, the list says
// that every event is sealed.
func TestAdminShowsUnsealedAuditEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seal()
	f.record(senja, nil, systemEvents(3, "report.sent")...)
	ctx := context.Background()
	// One of them has waited two minutes (the queue refuses UPDATE but to a
	// superuser with the triggers off).
	if _, err := f.db.Admin.Exec(ctx, `BEGIN; SET LOCAL session_replication_role = replica;
		UPDATE audit_unsealed SET queued_at = now() - interval '2 minutes'
		WHERE event_id = (SELECT min(event_id) FROM audit_unsealed WHERE tenant_id = `+strconv.FormatInt(f.tenantID(senja), 10)+`);
		COMMIT`); err != nil {
		t.Fatal(err)
	}
	staff := f.client()
	staff.login("support@jejak.test")
	a := staff.get("/admin")
	rows := regexp.MustCompile(`(?s)<tr data-testid="sealing-row">(.*?)</tr>`).FindAllStringSubmatch(a.body, -1)
	if a.status != http.StatusOK || len(rows) == 0 {
		t.Fatalf("/admin: %d, %d sealing rows", a.status, len(rows))
	}
	// Sign-ins wait too (the system tenant's trail); the row of interest
	// is kopi-senja's.
	var senjaRow string
	for _, r := range rows {
		if strings.Contains(r[1], "/admin/tenants/"+senja) {
			senjaRow = r[1]
		}
	}
	if !strings.Contains(senjaRow, ">3<") || !strings.Contains(senjaRow, `data-testid="sealing-late"`) || !strings.Contains(senjaRow, "2 minutes") {
		t.Fatalf("kopi-senja's sealing row: %s", senjaRow)
	}
	f.seal()
	if a := staff.get("/admin"); !strings.Contains(a.body, `data-testid="sealing-none"`) || strings.Contains(a.body, `data-testid="sealing-row"`) {
		t.Fatalf("after sealing, /admin still lists waiting events")
	}
}
