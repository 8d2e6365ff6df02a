package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/job"
)

// replayQueue keeps the test worker to its own jobs: the seeded demo jobs
// stay in the default queue.
const replayQueue = "replay-test"

// replayWorker is an engine with one worker on replayQueue, on a frozen
// clock an hour ahead of the database's (so jobs the console makes due
// "now" are due for it). Its kind test.replay fails permanently on its
// first run; a replayed run calls replayed, which decides the outcome.
func (f *fixture) replayWorker(replayed func(ctx context.Context, j *job.Job) error) *job.Engine {
	f.t.Helper()
	var dbNow time.Time
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT now()`).Scan(&dbNow); err != nil {
		f.t.Fatal(err)
	}
	e, err := job.New(job.Config{Pool: f.db.System, Logger: quietLog(), Workers: 1, WorkerID: "replay-worker",
		Queues: []string{replayQueue}, Clock: clock.NewFrozen(dbNow.Add(time.Hour)),
		Backoff: func(int) time.Duration { return 0 }, PollInterval: 20 * time.Millisecond})
	if err != nil {
		f.t.Fatal(err)
	}
	e.Register("test.replay", func(ctx context.Context, j *job.Job) error {
		if j.ReplayedBy == nil {
			return job.Permanent(errors.New("card declined: do not honor"))
		}
		return replayed(ctx, j)
	}, job.KindOptions{})
	if err := e.Start(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = e.Stop(context.Background()) })
	return e
}

// waitJobState polls job id's state until it is want, with a deadline.
func (f *fixture) waitJobState(id int64, want string) {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for f.jobState(id) != want {
		if time.Now().After(deadline) {
			f.t.Fatalf("job %d is %s, want %s", id, f.jobState(id), want)
		}
		time.Sleep(10 * time.Millisecond) //nolint:forbidigo // polling with a deadline
	}
}

// deadReplayJob enqueues a test.replay job for melati and waits until the
// worker has killed it (permanently).
func (f *fixture) deadReplayJob() int64 {
	f.t.Helper()
	id := f.enqueue("toko-bunga-melati", job.EnqueueParams{Kind: "test.replay", Queue: replayQueue,
		Payload: json.RawMessage(fmt.Sprintf(`{"tenant_id": %d}`, f.tenantID("toko-bunga-melati")))})
	f.waitJobState(id, "dead")
	return id
}

// TestAdminRetryOfPermanentFailureAsksFirst: a retry of a dead letter
// whose last failure was permanent, posted without the confirmation, shows
// why and asks (in the dead-letter row with htmx, on the job page
// without) and changes nothing; with the confirmation it retries and
// stamps the operator on the job. A transient dead letter needs no
// confirmation.
func TestAdminRetryOfPermanentFailureAsksFirst(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	id := f.makeDead("toko-bunga-melati", "email.weekly-report", 1, "smtp 550 mailbox unavailable\nat relay.go:12")[0]
	staff := f.client()
	staff.login("support@jejak.test")
	path := fmt.Sprintf("/admin/jobs/%d/retry", id)
	unchanged := func(when string) {
		t.Helper()
		var replayedBy *int64
		if err := f.db.Admin.QueryRow(context.Background(), `SELECT replayed_by FROM jobs WHERE id = $1`, id).Scan(&replayedBy); err != nil {
			t.Fatal(err)
		}
		if st := f.jobState(id); st != "dead" || replayedBy != nil || len(f.trail("toko-bunga-melati", "job.replayed")) != 0 {
			t.Fatalf("%s: an unconfirmed retry changed something: state %s, replayed_by %v", when, st, replayedBy)
		}
	}

	// A bulk retry's preview (admins only) says how many of its jobs
	// failed permanently.
	adm := f.client()
	adm.login("admin@jejak.test")
	if p := adm.get("/admin/dead/bulk?action=retry&kind=email.weekly-report"); !strings.Contains(p.body, `data-testid="bulk-permanent" data-count="1"`) ||
		!strings.Contains(p.body, "1 of them failed permanently") {
		t.Fatalf("bulk retry preview does not warn: %.2000s", p.body)
	}
	if p := adm.get("/admin/dead/bulk?action=retry&kind=email.weekly-report&class=transient"); strings.Contains(p.body, `data-testid="bulk-permanent"`) {
		t.Fatal("a preview of transient failures warns of permanent ones")
	}

	a := staff.post(path, staff.withCSRF(url.Values{"reason": {"relay fixed"}, "back": {"/admin/dead"}}), true)
	if a.status != http.StatusOK || !contains(a.body, `data-testid="dead-row-confirm"`, `name="confirm" value="permanent"`,
		`value="relay fixed"`, "This job failed permanently: smtp 550 mailbox unavailable. Retrying will likely fail again. Retry anyway?") ||
		strings.Contains(a.body, "relay.go") || strings.Contains(a.body, "<html") {
		t.Fatalf("htmx retry without confirmation: %d %.1500s", a.status, a.body)
	}
	unchanged("htmx")
	a = staff.post(path, staff.withCSRF(url.Values{"reason": {"relay fixed"}}), false)
	if a.status != http.StatusOK || !contains(a.body, "<html", `data-testid="retry-confirm"`, `data-testid="retry-anyway"`, "failed permanently") {
		t.Fatalf("retry without confirmation: %d %.1500s", a.status, a.body)
	}
	unchanged("no JavaScript")
	// A confirmation without a reason is still refused for the reason.
	if a := staff.post(path, staff.withCSRF(url.Values{"reason": {" "}, "confirm": {"permanent"}}), false); a.status != http.StatusUnprocessableEntity {
		t.Fatalf("confirmed retry without a reason: %d", a.status)
	}
	unchanged("no reason")

	a = staff.post(path, staff.withCSRF(url.Values{"reason": {"relay fixed"}, "confirm": {"permanent"}}), false)
	if a.status != http.StatusSeeOther || a.location != fmt.Sprintf("/admin/jobs/%d", id) {
		t.Fatalf("confirmed retry: %d %q", a.status, a.location)
	}
	var replayedBy *int64
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT replayed_by FROM jobs WHERE id = $1`, id).Scan(&replayedBy); err != nil {
		t.Fatal(err)
	}
	if f.jobState(id) != "pending" || replayedBy == nil || *replayedBy != f.userID("support@jejak.test") {
		t.Fatalf("after the confirmed retry: %s, replayed_by %v", f.jobState(id), replayedBy)
	}

	// A job that died of transient failures is retried at once.
	tid := f.enqueue("kopi-senja", job.EnqueueParams{MaxAttempts: 1})
	for _, j := range f.claimAll("test-worker") {
		cause := errors.New("released by test")
		if j.ID == tid {
			cause = errors.New("connection reset")
		}
		f.fail("test-worker", j, cause)
	}
	if st := f.jobState(tid); st != "dead" {
		t.Fatalf("transient job is %s", st)
	}
	a = staff.post(fmt.Sprintf("/admin/jobs/%d/retry", tid), staff.withCSRF(url.Values{"reason": {"network back"}, "back": {"/admin/dead"}}), true)
	if a.status != http.StatusOK || !strings.Contains(a.body, `data-testid="dead-row-done"`) || f.jobState(tid) != "pending" {
		t.Fatalf("transient retry: %d %s %.500s", a.status, f.jobState(tid), a.body)
	}
}

// TestAdminReplayOutcomeInTenantTrail: a worker really runs the replayed
// jobs; one succeeds and one dies again, and each outcome is in the
// tenant's trail under the trace of the operator's job.replayed event,
// the failure with its error, and the owner reads both as sentences.
func TestAdminReplayOutcomeInTenantTrail(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	var healed atomic.Int64
	f.replayWorker(func(_ context.Context, j *job.Job) error {
		if j.ID == healed.Load() {
			return nil
		}
		return job.Permanent(errors.New("card declined again: insufficient funds"))
	})
	good, bad := f.deadReplayJob(), f.deadReplayJob()
	healed.Store(good)
	staff := f.client()
	staff.login("support@jejak.test")
	for _, id := range []int64{good, bad} {
		a := staff.post(fmt.Sprintf("/admin/jobs/%d/retry", id), staff.withCSRF(url.Values{"reason": {"customer updated the card"}, "confirm": {"permanent"}}), false)
		if a.status != http.StatusSeeOther {
			t.Fatalf("retry %d: %d %.300s", id, a.status, a.body)
		}
	}
	f.waitJobState(good, "succeeded")
	f.waitJobState(bad, "dead")

	replayTrace := map[int64]string{}
	for _, e := range f.trail("toko-bunga-melati", "job.replayed") {
		replayTrace[*e.JobID] = e.TraceID
	}
	outcome := func(action string, id int64) audit.Recorded {
		t.Helper()
		for _, e := range f.trail("toko-bunga-melati", action) {
			if e.JobID != nil && *e.JobID == id {
				return e
			}
		}
		t.Fatalf("no %s event for job %d", action, id)
		return audit.Recorded{}
	}
	ok := outcome("job.replay_succeeded", good)
	if ok.TraceID == "" || ok.TraceID != replayTrace[good] || ok.ActorKind != audit.ActorSystem {
		t.Fatalf("success event %+v, replay trace %q", ok, replayTrace[good])
	}
	failed := outcome("job.replay_failed", bad)
	var detail map[string]any
	if err := json.Unmarshal(failed.Detail, &detail); err != nil {
		t.Fatal(err)
	}
	if failed.TraceID == "" || failed.TraceID != replayTrace[bad] || detail["error"] != "card declined again: insufficient funds" ||
		detail["class"] != "permanent" || detail["replayed_by"] != fmt.Sprint(f.userID("support@jejak.test")) {
		t.Fatalf("dead-again event %+v %v, replay trace %q", failed, detail, replayTrace[bad])
	}
	for _, action := range []string{"job.replay_succeeded", "job.replay_failed"} {
		if n := len(f.trail("kopi-senja", action)); n != 0 {
			t.Fatalf("kopi-senja's trail got %d %s events", n, action)
		}
	}
	if n := len(f.trail("toko-bunga-melati", "job.replay_succeeded")); n != 1 {
		t.Fatalf("%d success events, want 1 (the dead-again job must not record one)", n)
	}

	f.seal()
	owner := f.client()
	owner.login("budi@melati.test")
	page := owner.get("/t/toko-bunga-melati/audit")
	if !contains(page.body, fmt.Sprintf("#%d", good), "retried by support, succeeded on attempt 2",
		"retried by support, failed again on attempt 2 and gave up: card declined again: insufficient funds") {
		t.Fatalf("owner's timeline lacks the replay outcomes: %.4000s", page.body)
	}
}
