package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/app"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/kinds"
	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/schedule"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/web"
)

// newSensitiveFixture is a dashboard whose engine has the shipped kinds
// registered (so user.disable-access is sensitive and audited) and no
// workers: tests run jobs with WorkOnce, on clk.
func newSensitiveFixture(t *testing.T, clk clock.Clock) *fixture {
	t.Helper()
	db := testdb.New(t)
	if err := demo.Seed(context.Background(), db.System); err != nil {
		t.Fatalf("seed demo data: %v", err)
	}
	log := quietLog()
	engine, err := job.New(job.Config{Pool: db.System, Clock: clk, Logger: log, WorkerID: "sensitive-test",
		Backoff: func(int) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	kinds.Register(engine, kinds.Deps{App: db.App, System: db.System, Clock: clk})
	deps := app.NewDeps(db.App, db.System, engine, clk, log)
	deps.StatsMaxAge = -1
	sched := schedule.New(db.System, clk, "sensitive-test",
		append(schedule.Shipped(engine), schedule.Retention(engine, clk, outbox.DefaultRetention)...)...)
	deps.Schedules = sched
	srv := httptest.NewServer(web.New(deps))
	t.Cleanup(srv.Close)
	return &fixture{t: t, db: db, srv: srv, jobs: engine, sched: sched}
}

func (f *fixture) work(n int) {
	f.t.Helper()
	if _, err := f.jobs.WorkOnce(context.Background(), n); err != nil {
		f.t.Fatalf("work: %v", err)
	}
}

type trailEvent struct {
	Action, Trace string
	Detail        map[string]any
}

// trail returns the tenant's events with the given trace, in order.
func (f *fixture) traceTrail(tenantID int64, trace string) []trailEvent {
	f.t.Helper()
	rows, err := f.db.Admin.Query(context.Background(), `SELECT action, trace_id, detail FROM audit_events
		WHERE tenant_id = $1 AND trace_id = $2 ORDER BY seq`, tenantID, trace)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []trailEvent
	for rows.Next() {
		var e trailEvent
		if err := rows.Scan(&e.Action, &e.Trace, &e.Detail); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func trailActions(es []trailEvent) string {
	var a []string
	for _, e := range es {
		a = append(a, e.Action)
	}
	return strings.Join(a, " ")
}

// requestDisable has support ask to disable rina, and admin approve; it
// returns the approval id and the job id.
func requestAndApprove(t *testing.T, f *fixture, supportC, adminC *client, reason string) (int64, int64) {
	t.Helper()
	rina := f.userID("rina@melati.test")
	path := "/admin/tenants/toko-bunga-melati/members/" + strconv.FormatInt(rina, 10) + "/disable"
	a := supportC.post(path, supportC.withCSRF(url.Values{"reason": {reason}}), false)
	if a.status != http.StatusSeeOther || a.location != "/admin/approvals" {
		t.Fatalf("request: %d → %q: %.400s", a.status, a.location, a.body)
	}
	var id int64
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT id FROM approvals WHERE state = 'pending' ORDER BY id DESC LIMIT 1`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	a = adminC.post("/admin/approvals/"+strconv.FormatInt(id, 10)+"/approve", adminC.withCSRF(nil), false)
	if a.status != http.StatusSeeOther {
		t.Fatalf("approve: %d: %.400s", a.status, a.body)
	}
	var jobID int64
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT job_id FROM approvals WHERE id = $1`, id).Scan(&jobID); err != nil {
		t.Fatal(err)
	}
	return id, jobID
}

// TestDisableAccessTwoPersonFlow walks the whole flow over HTTP: support
// requests with a reason (an approval, not a job), cannot approve it
// themselves, a second staff member approves, the job runs, the member's
// membership is disabled and sessions revoked, and every stage is in the
// tenant's trail under the request's trace id. A second job carrying the
// consumed approval is rejected.
func TestDisableAccessTwoPersonFlow(t *testing.T) {
	t.Parallel()
	f := newSensitiveFixture(t, clock.Database{})
	melati := f.tenantID("toko-bunga-melati")
	rina := f.userID("rina@melati.test")
	member := f.client()
	member.login("rina@melati.test")
	if a := member.get("/t/toko-bunga-melati/"); a.status != http.StatusOK {
		t.Fatalf("member home before: %d", a.status)
	}
	sup, adm := f.client(), f.client()
	sup.login("support@jejak.test")
	adm.login("admin@jejak.test")

	// The staff tenant page and its search.
	if a := sup.get("/admin/tenants?q=melati"); a.status != 200 || !strings.Contains(a.body, "Toko Bunga Melati") || strings.Contains(a.body, "Kopi Senja") {
		t.Fatalf("tenant search: %d %.300s", a.status, a.body)
	}
	page := sup.get("/admin/tenants/toko-bunga-melati")
	if page.status != 200 || !strings.Contains(page.body, "Rina Wulandari") || !strings.Contains(page.body, `data-testid="staff-audit"`) {
		t.Fatalf("tenant page: %d %.500s", page.status, page.body)
	}
	// The trail's records come with the staff page: the route that serves
	// one on demand is the tenant's members'.
	if strings.Contains(page.body, `data-testid="audit-record-link"`) || strings.Contains(page.body, `hx-trigger="toggle once"`) ||
		!strings.Contains(page.body, `<div class="meta">`) {
		t.Fatalf("staff tenant page: records not in place: %.500s", page.body)
	}
	sup.get("/admin/tenants/toko-bunga-melati?action=project.create")
	if n := f.count(`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'staff.viewed_audit'`, melati); n != 1 {
		t.Fatalf("staff.viewed_audit recorded %d times for two reads in one hour, want 1", n)
	}
	if a := sup.get("/admin/tenants/no-such-tenant"); a.status != http.StatusNotFound {
		t.Fatalf("unknown tenant: %d", a.status)
	}

	// A request without a reason changes nothing.
	path := "/admin/tenants/toko-bunga-melati/members/" + strconv.FormatInt(rina, 10) + "/disable"
	if a := sup.post(path, sup.withCSRF(url.Values{"reason": {"  "}}), false); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("blank reason: %d", a.status)
	}
	if n := f.count(`SELECT count(*) FROM approvals`); n != 0 {
		t.Fatalf("blank reason created %d approvals", n)
	}
	// The request is an approval, not a job.
	a := sup.post(path, sup.withCSRF(url.Values{"reason": {"Pemilik melaporkan laptop Rina hilang"}}), false)
	if a.status != http.StatusSeeOther {
		t.Fatalf("request: %d %.300s", a.status, a.body)
	}
	var approvalID int64
	var trace string
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT id, trace_id FROM approvals`).Scan(&approvalID, &trace); err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT count(*) FROM jobs WHERE kind = 'user.disable-access'`); n != 0 {
		t.Fatalf("a request enqueued %d jobs before approval", n)
	}
	ap := "/admin/approvals/" + strconv.FormatInt(approvalID, 10)
	// Self-approval is refused and changes nothing.
	if a := sup.post(ap+"/approve", sup.withCSRF(nil), false); a.status != http.StatusForbidden {
		t.Fatalf("self-approval: %d %.300s", a.status, a.body)
	}
	if n := f.count(`SELECT count(*) FROM approvals WHERE state = 'pending'`); n != 1 {
		t.Fatal("self-approval changed the request")
	}
	list := adm.get("/admin/approvals")
	if !strings.Contains(list.body, `data-approval-id="`+strconv.FormatInt(approvalID, 10)+`"`) || !strings.Contains(list.body, "laptop Rina") {
		t.Fatalf("approvals page misses the request: %.500s", list.body)
	}
	if a := adm.post(ap+"/approve", adm.withCSRF(nil), false); a.status != http.StatusSeeOther {
		t.Fatalf("approve: %d %.300s", a.status, a.body)
	}
	if a := adm.post(ap+"/approve", adm.withCSRF(nil), false); a.status != http.StatusConflict {
		t.Fatalf("second approve: %d", a.status)
	}
	var jobID int64
	var expires time.Time
	var key string
	var requestedBy int64
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT id, expires_at, idempotency_key, requested_by FROM jobs WHERE kind = 'user.disable-access'`).Scan(&jobID, &expires, &key, &requestedBy); err != nil {
		t.Fatal(err)
	}
	if requestedBy != f.userID("support@jejak.test") || key == "" || time.Until(expires) > 16*time.Minute || time.Until(expires) < 10*time.Minute {
		t.Fatalf("job metadata: requested_by %d key %q expires in %s", requestedBy, key, time.Until(expires))
	}
	// Still a member until the job runs.
	if a := member.get("/t/toko-bunga-melati/"); a.status != http.StatusOK {
		t.Fatalf("member home before the job: %d", a.status)
	}
	f.work(5)
	if st := f.jobState(jobID); st != "succeeded" {
		t.Fatalf("job %d is %s", jobID, st)
	}
	if n := f.count(`SELECT count(*) FROM memberships WHERE user_id = $1 AND tenant_id = $2 AND disabled_at IS NOT NULL`, rina, melati); n != 1 {
		t.Fatal("membership not disabled")
	}
	if n := f.count(`SELECT count(*) FROM user_sessions WHERE user_id = $1`, rina); n != 0 {
		t.Fatal("sessions not revoked")
	}
	if a := member.get("/t/toko-bunga-melati/"); a.status != http.StatusSeeOther || a.location != "/login" {
		t.Fatalf("member after revocation: %d → %q, want 303 to /login", a.status, a.location)
	}
	// Signing in again does not bring the tenant back.
	member.login("rina@melati.test")
	if a := member.get("/t/toko-bunga-melati/"); a.status != http.StatusNotFound {
		t.Fatalf("disabled member signed in again: %d", a.status)
	}
	got := trailActions(f.traceTrail(melati, trace))
	want := "approval.requested approval.approved job.queued job.claimed job.started member.access_disabled job.succeeded"
	if got != want {
		t.Fatalf("trail under trace %s:\n got %s\nwant %s", trace, got, want)
	}
	// The owner's timeline and the staff page show the story.
	owner := f.client()
	owner.login("budi@melati.test")
	if a := owner.get("/t/toko-bunga-melati/audit?action=member.access_disabled"); !strings.Contains(withRecords(t, owner, a.body), trace) {
		t.Fatalf("owner timeline misses the revocation")
	}
	if a := adm.get("/admin/search?trace=" + trace); !strings.Contains(a.body, "member.access_disabled") {
		t.Fatalf("trace search misses the revocation: %.300s", a.body)
	}
	// Admin's read of the trail through trace search is recorded too.
	if n := f.count(`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'staff.viewed_audit' AND actor_id = $2`,
		melati, f.userID("admin@jejak.test")); n != 1 {
		t.Fatalf("admin's trace search recorded %d staff.viewed_audit", n)
	}

	// The approval is used up: another job carrying it is rejected.
	var payload json.RawMessage
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT payload FROM jobs WHERE id = $1`, jobID).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	f.db.Admin.Exec(context.Background(), `UPDATE memberships SET disabled_at = NULL WHERE user_id = $1`, rina) //nolint:errcheck
	expiresAt := time.Now().Add(10 * time.Minute)
	tx, err := f.db.System.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.jobs.Enqueue(context.Background(), tx, job.EnqueueParams{TenantID: melati, Kind: "user.disable-access",
		Payload: payload, RequestedBy: &requestedBy, ExpiresAt: &expiresAt, IdempotencyKey: "forged-replay", TraceID: "forged-replay-trace"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.work(5)
	if st := f.jobState(again.ID); st != "dead" {
		t.Fatalf("job reusing a consumed approval is %s", st)
	}
	if n := f.count(`SELECT count(*) FROM jobs WHERE id = $1 AND flagged AND error_class = 'policy'`, again.ID); n != 1 {
		t.Fatal("reuse not flagged as policy failure")
	}
	rej := f.traceTrail(melati, "forged-replay-trace")
	if trailActions(rej) != "job.queued job.claimed job.started job.rejected job.dead_lettered" || rej[3].Detail["reason"] != "approval_consumed" {
		t.Fatalf("reuse trail: %s %v", trailActions(rej), rej)
	}
	if n := f.count(`SELECT count(*) FROM memberships WHERE user_id = $1 AND disabled_at IS NOT NULL`, rina); n != 0 {
		t.Fatal("a rejected job disabled the membership")
	}
}

// TestDisableAccessRejectedWhenRequesterDemoted: enqueued after approval,
// the requester then loses their staff role before any worker runs it; at
// dequeue the job is rejected as a policy failure, flagged, and nothing is
// disabled.
func TestDisableAccessRejectedWhenRequesterDemoted(t *testing.T) {
	t.Parallel()
	f := newSensitiveFixture(t, clock.Database{})
	melati := f.tenantID("toko-bunga-melati")
	rina := f.userID("rina@melati.test")
	member := f.client()
	member.login("rina@melati.test")
	sup, adm := f.client(), f.client()
	sup.login("support@jejak.test")
	adm.login("admin@jejak.test")
	_, jobID := requestAndApprove(t, f, sup, adm, "akses dicabut")
	if _, err := f.db.Admin.Exec(context.Background(), `UPDATE users SET staff_role = NULL WHERE email = 'support@jejak.test'`); err != nil {
		t.Fatal(err)
	}
	// The dashboard's engine is a web-only replica; a separate worker
	// replica starts only now and runs the job.
	worker, err := job.New(job.Config{Pool: f.db.System, Clock: clock.Database{}, Logger: quietLog(), WorkerID: "worker-replica"})
	if err != nil {
		t.Fatal(err)
	}
	kinds.Register(worker, kinds.Deps{App: f.db.App, System: f.db.System})
	if n, err := worker.WorkOnce(context.Background(), 5); err != nil || n != 1 {
		t.Fatalf("worker replica ran %d jobs: %v", n, err)
	}
	if st := f.jobState(jobID); st != "dead" {
		t.Fatalf("job is %s, want dead", st)
	}
	if n := f.count(`SELECT count(*) FROM jobs WHERE id = $1 AND flagged AND error_class = 'policy'`, jobID); n != 1 {
		t.Fatal("not flagged as a policy failure")
	}
	var reason string
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT detail->>'reason' FROM audit_events WHERE job_id = $1 AND action = 'job.rejected'`, jobID).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if reason != "requester_lost_role" {
		t.Fatalf("rejected reason %q", reason)
	}
	if n := f.count(`SELECT count(*) FROM memberships WHERE user_id = $1 AND tenant_id = $2 AND disabled_at IS NOT NULL`, rina, melati); n != 0 {
		t.Fatal("membership disabled despite the rejection")
	}
	if a := member.get("/t/toko-bunga-melati/"); a.status != http.StatusOK {
		t.Fatalf("member lost access: %d", a.status)
	}
	if n := f.count(`SELECT count(*) FROM approvals WHERE consumed_at IS NOT NULL`); n != 0 {
		t.Fatal("a rejected job consumed its approval")
	}
}

// TestRejectNeedsReasonAndRunsNothing: rejection is by another staff
// member, with a reason; no job is enqueued.
func TestRejectNeedsReasonAndRunsNothing(t *testing.T) {
	t.Parallel()
	f := newSensitiveFixture(t, clock.Database{})
	sup, adm := f.client(), f.client()
	sup.login("support@jejak.test")
	adm.login("admin@jejak.test")
	rina := f.userID("rina@melati.test")
	sup.post("/admin/tenants/toko-bunga-melati/members/"+strconv.FormatInt(rina, 10)+"/disable", sup.withCSRF(url.Values{"reason": {"x"}}), false)
	var id int64
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT id FROM approvals`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	p := "/admin/approvals/" + strconv.FormatInt(id, 10) + "/reject"
	if a := adm.post(p, adm.withCSRF(nil), false); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("reject without reason: %d", a.status)
	}
	if a := adm.post(p, adm.withCSRF(url.Values{"reason": {"tidak ada bukti"}}), false); a.status != http.StatusSeeOther {
		t.Fatalf("reject: %d", a.status)
	}
	if n := f.count(`SELECT count(*) FROM approvals WHERE state = 'rejected' AND decision_reason = 'tidak ada bukti'`); n != 1 {
		t.Fatal("rejection not stored")
	}
	if n := f.count(`SELECT count(*) FROM jobs WHERE kind = 'user.disable-access'`); n != 0 {
		t.Fatal("a rejected request enqueued a job")
	}
	if n := f.count(`SELECT count(*) FROM audit_events WHERE action = 'approval.rejected'`); n != 1 {
		t.Fatal("rejection not audited")
	}
}

// makeApprovals inserts n pending disable-access requests for rina, made by
// a third staff member (so support and admin may both decide them).
func (f *fixture) makeApprovals(n int) []int64 {
	f.t.Helper()
	ctx := context.Background()
	var ops int64
	err := f.db.Admin.QueryRow(ctx, `INSERT INTO users (email, name, password_hash, staff_role)
		VALUES ('ops@jejak.test', 'Ops', 'x', 'support') ON CONFLICT (email) DO UPDATE SET name = EXCLUDED.name RETURNING id`).Scan(&ops)
	if err != nil {
		f.t.Fatal(err)
	}
	ids := make([]int64, n)
	for i := range ids {
		err := f.db.Admin.QueryRow(ctx, `INSERT INTO approvals (tenant_id, action, target_id, reason, requested_by, requested_at, expires_at, trace_id)
			SELECT t.id, 'user.disable-access', $1, 'matrix', $2, now(), now() + interval '1 day', 'matrix-' || $3::text
			  FROM tenants t WHERE t.slug = 'toko-bunga-melati' RETURNING id`, f.userID("rina@melati.test"), ops, strconv.Itoa(i)).Scan(&ids[i])
		if err != nil {
			f.t.Fatal(err)
		}
	}
	return ids
}

// TestAdminPausesAndSchedules: staff pause a kind with a reason from /admin
// (no reason: 422, nothing paused), see it listed, resume it; /admin lists
// the schedules (retention among them) with their last and next run.
func TestAdminPausesAndSchedules(t *testing.T) {
	t.Parallel()
	f := newSensitiveFixture(t, clock.Database{})
	sup := f.client()
	sup.login("admin@jejak.test")
	home := sup.get("/admin")
	if strings.Count(home.body, `data-testid="schedule-row"`) != 5 || !strings.Contains(home.body, "payment.reconcile") ||
		!strings.Contains(home.body, `data-name="job.retention"`) || !strings.Contains(home.body, `data-name="outbox.retention"`) {
		t.Fatalf("/admin schedules: %.3000s", home.body)
	}
	if _, err := f.sched.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	home = sup.get("/admin")
	for _, name := range []string{"job.retention", "outbox.retention"} {
		row := home.body[strings.Index(home.body, `data-name="`+name+`"`):]
		row = row[:strings.Index(row, "</tr>")]
		if !strings.Contains(row, "pruned") || !strings.Contains(row, "sensitive-test") || !strings.Contains(row, "hourly") {
			t.Fatalf("/admin %s row after a run: %s", name, row)
		}
	}
	if a := sup.post("/admin/pauses", sup.withCSRF(url.Values{"scope": {"kind"}, "name": {"payment.charge"}}), false); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("pause without reason: %d", a.status)
	}
	if n := f.count(`SELECT count(*) FROM job_pauses`); n != 0 {
		t.Fatal("pause without reason stored")
	}
	if a := sup.post("/admin/pauses", sup.withCSRF(url.Values{"scope": {"kind"}, "name": {"payment.charge"}, "reason": {"provider outage"}}), false); a.status != http.StatusSeeOther {
		t.Fatalf("pause: %d %.300s", a.status, a.body)
	}
	if a := sup.post("/admin/pauses", sup.withCSRF(url.Values{"scope": {"kind"}, "name": {"payment.charge"}, "reason": {"again"}}), false); a.status != http.StatusConflict {
		t.Fatalf("pause twice: %d", a.status)
	}
	home = sup.get("/admin")
	if !strings.Contains(home.body, `data-name="payment.charge"`) || !strings.Contains(home.body, "provider outage") {
		t.Fatalf("/admin pauses: %.3000s", home.body)
	}
	if a := sup.post("/admin/pauses/resume", sup.withCSRF(url.Values{"scope": {"kind"}, "name": {"payment.charge"}, "reason": {"provider back"}}), false); a.status != http.StatusSeeOther {
		t.Fatalf("resume: %d", a.status)
	}
	if n := f.count(`SELECT count(*) FROM job_pause_log`); n != 2 {
		t.Fatalf("pause log: %d", n)
	}
	if home := sup.get("/admin"); !strings.Contains(home.body, `data-testid="pause-log"`) || !strings.Contains(home.body, "provider back") {
		t.Fatalf("/admin pause log: %.3000s", home.body)
	}
}

// TestDeadSensitiveJobReplayNeedsSecondPerson: retrying a dead
// user.disable-access job from the dashboard opens an approval request
// instead (nothing runs); a bulk retry passes over it; the requester
// cannot approve; once a second staff member approves, the job runs again
// with a fresh expiry and the replay names the approval in the trail.
func TestDeadSensitiveJobReplayNeedsSecondPerson(t *testing.T) {
	t.Parallel()
	f := newSensitiveFixture(t, clock.Database{})
	ctx := context.Background()
	rina := f.userID("rina@melati.test")
	sup, adm := f.client(), f.client()
	sup.login("support@jejak.test")
	adm.login("admin@jejak.test")
	_, jobID := requestAndApprove(t, f, sup, adm, "akun dibajak")
	// It died of transient failures (its approval unused) and expired.
	if _, err := f.db.Admin.Exec(ctx, `UPDATE jobs SET state = 'dead', finished_at = now(), attempt = 3, error_class = 'transient',
		last_error = 'database timeout', expires_at = now() - interval '1 hour' WHERE id = $1`, jobID); err != nil {
		t.Fatal(err)
	}
	path := "/admin/jobs/" + strconv.FormatInt(jobID, 10) + "/retry"
	a := sup.post(path, sup.withCSRF(url.Values{"reason": {"database is back"}}), false)
	if a.status != http.StatusSeeOther || a.location != "/admin/approvals" {
		t.Fatalf("retry of a sensitive dead job: %d → %q %.300s", a.status, a.location, a.body)
	}
	if st := f.jobState(jobID); st != "dead" {
		t.Fatalf("job ran without approval: %s", st)
	}
	var replayID int64
	if err := f.db.Admin.QueryRow(ctx, `SELECT id FROM approvals WHERE action = 'job.replay' AND target_id = $1 AND state = 'pending'`, jobID).Scan(&replayID); err != nil {
		t.Fatalf("no replay request: %v", err)
	}
	// Bulk retry passes over sensitive kinds.
	bulk := sup.post("/admin/dead/bulk", sup.withCSRF(url.Values{"action": {"retry"}, "reason": {"bulk"}, "max_id": {strconv.FormatInt(jobID, 10)}}), false)
	if bulk.status >= 500 {
		t.Fatalf("bulk: %d", bulk.status)
	}
	if st := f.jobState(jobID); st != "dead" {
		t.Fatalf("bulk retry replayed a sensitive job: %s", st)
	}
	ap := "/admin/approvals/" + strconv.FormatInt(replayID, 10) + "/approve"
	if a := sup.post(ap, sup.withCSRF(nil), false); a.status != http.StatusForbidden {
		t.Fatalf("self-approval of a replay: %d", a.status)
	}
	if a := adm.post(ap, adm.withCSRF(nil), false); a.status != http.StatusSeeOther {
		t.Fatalf("approve replay: %d %.300s", a.status, a.body)
	}
	if st := f.jobState(jobID); st != "pending" {
		t.Fatalf("approved replay left the job %s", st)
	}
	f.work(5)
	if st := f.jobState(jobID); st != "succeeded" {
		t.Fatalf("replayed job is %s", st)
	}
	if n := f.count(`SELECT count(*) FROM memberships WHERE user_id = $1 AND disabled_at IS NOT NULL`, rina); n != 1 {
		t.Fatal("replayed job had no effect")
	}
	var approvalInDetail string
	if err := f.db.Admin.QueryRow(ctx, `SELECT detail->>'approval_id' FROM audit_events WHERE job_id = $1 AND action = 'job.replayed'`, jobID).Scan(&approvalInDetail); err != nil {
		t.Fatal(err)
	}
	if approvalInDetail != strconv.FormatInt(replayID, 10) {
		t.Fatalf("job.replayed names approval %q", approvalInDetail)
	}
	if n := f.count(`SELECT count(*) FROM approvals WHERE id = $1 AND consumed_at IS NOT NULL`, replayID); n != 1 {
		t.Fatal("replay approval not consumed")
	}
	// The approval is single use: approving again is refused.
	if a := adm.post(ap, adm.withCSRF(nil), false); a.status != http.StatusConflict {
		t.Fatalf("second approval of a replay: %d", a.status)
	}
}

// TestJobPageShowsDependenciesBothWays: a job enqueued to run after
// another links to it, and the other lists it as waiting.
func TestJobPageShowsDependenciesBothWays(t *testing.T) {
	t.Parallel()
	f := newSensitiveFixture(t, clock.Database{})
	first := f.enqueue("toko-bunga-melati", job.EnqueueParams{Kind: "points.award", Payload: json.RawMessage(`{"customer":"c","points":1,"message_id":"m1"}`)})
	second := f.enqueue("toko-bunga-melati", job.EnqueueParams{Kind: "points.award", Payload: json.RawMessage(`{"customer":"c","points":2,"message_id":"m2"}`), DependsOn: &first})
	sup := f.client()
	sup.login("support@jejak.test")
	a := sup.get("/admin/jobs/" + strconv.FormatInt(second, 10))
	if !strings.Contains(a.body, `href="/admin/jobs/`+strconv.FormatInt(first, 10)+`"`) {
		t.Fatalf("dependent's page does not link its prerequisite: %.2000s", a.body)
	}
	b := sup.get("/admin/jobs/" + strconv.FormatInt(first, 10))
	if !strings.Contains(b.body, `href="/admin/jobs/`+strconv.FormatInt(second, 10)+`"`) {
		t.Fatal("prerequisite's page does not list its dependent")
	}
}
