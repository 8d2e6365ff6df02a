package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestSeed000Chronology runs a fixed story on a frozen clock and compares
// the printed chronology line by line: the jobs, instants, attempts,
// backoffs (2 then 4 minutes), order, dead letter and the refusal to
// complete a job not held. Any change to the engine's timing or ordering
// shows up as a diff.
func TestSeed000Chronology(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenants := newTenants(t, db, 2)
	jakarta, err := time.LoadLocation("Asia/Jakarta")
	if err != nil {
		t.Fatal(err)
	}
	at := func(hhmm string) time.Time {
		tm, err := time.ParseInLocation("2006-01-02 15:04", "2026-02-02 "+hhmm, jakarta)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	clk := clock.NewFrozen(at("08:00"))
	e := newEngine(t, db, job.Config{Clock: clk, Backoff: fixedBackoff})
	const worker = "worker-1"
	const smtpDown = "SMTP tidak merespons dalam 5 detik"

	var out strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&out, format+"\n", args...) }
	stamp := func(tm time.Time) string { return tm.In(jakarta).Format("2006-01-02 15:04:05") }
	show := func(id int64) string {
		r, err := e.Get(ctx, id)
		if err != nil {
			t.Fatalf("get job %d: %v", id, err)
		}
		return fmt.Sprintf("#%d %s %s, attempts=%d, available %s", r.ID, r.State, r.Kind, r.Attempt, stamp(r.AvailableAt))
	}
	claimOne := func() string {
		jobs, err := e.Claim(ctx, worker, 1)
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		if len(jobs) == 0 {
			return "(none)"
		}
		return show(jobs[0].ID)
	}
	fail := func(id int64) job.State {
		st, err := e.Fail(ctx, worker, id, errors.New(smtpDown))
		if err != nil {
			t.Fatalf("fail %d: %v", id, err)
		}
		return st
	}

	p("== 1) Enqueue two jobs (payload carries tenant_id) ==")
	t8 := at("08:00")
	j1 := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenants[0], Kind: "email.weekly-report",
		Payload: json.RawMessage(fmt.Sprintf(`{"tenant_id": %d, "email": "owner@melati.test"}`, tenants[0])), AvailableAt: &t8})
	p("job %s", show(j1.ID))
	t805 := at("08:05")
	j2 := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenants[1], Kind: "subscription.sweep",
		Payload: json.RawMessage(fmt.Sprintf(`{"tenant_id": %d, "check_at": "2026-02-02 08:05:00"}`, tenants[1])), AvailableAt: &t805})
	p("job %s", show(j2.ID))

	p("\n== 2) Worker 08:00 — email fails (SMTP down) ==")
	p("claim: %s", claimOne())
	p("fail: new state '%s', backoff 2^1 minutes", fail(j1.ID))

	p("\n== 3) Worker 08:01 — not due yet ==")
	clk.Set(at("08:01"))
	p("claim: %s", claimOne())

	p("\n== 4) Worker 08:02 — second attempt fails again ==")
	clk.Set(at("08:02"))
	p("claim: %s", claimOne())
	p("fail: new state '%s', backoff 2^2 minutes", fail(j1.ID))

	p("\n== 5) Worker 08:06 — sweep job done, email dead ==")
	clk.Set(at("08:06"))
	p("claim: %s", claimOne())
	if err := e.Complete(ctx, worker, j2.ID); err != nil {
		t.Fatalf("complete sweep: %v", err)
	}
	p("complete: job #%d succeeded", j2.ID)
	p("claim: %s", claimOne())
	p("fail: new state '%s' (attempt 3 = max attempts)", fail(j1.ID))

	p("\n== 6) Dead letters ==")
	dead, err := e.DeadLetters(ctx, job.DeadLetterFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dead {
		p("  job #%d [tenant #%d] %s — %s (attempts=%d)", d.ID, d.TenantID, d.Kind, d.LastError, d.Attempts)
	}

	p("\n== 7) complete() of a job not being processed is refused ==")
	if err := e.Complete(ctx, worker, 999); errors.Is(err, job.ErrNotHeld) {
		p("Refused: %v", err)
	} else {
		p("complete(999) passed (it must not!): %v", err)
	}

	want := fmt.Sprintf(`== 1) Enqueue two jobs (payload carries tenant_id) ==
job #1 pending email.weekly-report, attempts=0, available 2026-02-02 08:00:00
job #2 pending subscription.sweep, attempts=0, available 2026-02-02 08:05:00

== 2) Worker 08:00 — email fails (SMTP down) ==
claim: #1 running email.weekly-report, attempts=1, available 2026-02-02 08:00:00
fail: new state 'pending', backoff 2^1 minutes

== 3) Worker 08:01 — not due yet ==
claim: (none)

== 4) Worker 08:02 — second attempt fails again ==
claim: #1 running email.weekly-report, attempts=2, available 2026-02-02 08:02:00
fail: new state 'pending', backoff 2^2 minutes

== 5) Worker 08:06 — sweep job done, email dead ==
claim: #2 running subscription.sweep, attempts=1, available 2026-02-02 08:05:00
complete: job #2 succeeded
claim: #1 running email.weekly-report, attempts=3, available 2026-02-02 08:06:00
fail: new state 'dead' (attempt 3 = max attempts)

== 6) Dead letters ==
  job #1 [tenant #%d] email.weekly-report — SMTP tidak merespons dalam 5 detik (attempts=3)

== 7) complete() of a job not being processed is refused ==
Refused: complete job 999: job is not held by this worker
`, tenants[0])
	if got := out.String(); got != want {
		t.Fatalf("chronology differs from the expected one.\n--- got ---\n%s\n--- want ---\n%s", got, want)
	}

	// The attempt history kept every failure, not only the last.
	r, err := e.Get(ctx, j1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Errors) != 3 {
		t.Fatalf("attempt history has %d entries, want 3: %+v", len(r.Errors), r.Errors)
	}
	for i, a := range r.Errors {
		if a.Attempt != i+1 || a.Worker != worker || a.Class != job.ClassTransient || a.Error != smtpDown {
			t.Errorf("history[%d] = %+v", i, a)
		}
	}
	wantAt := []time.Time{at("08:00"), at("08:02"), at("08:06")}
	for i, a := range r.Errors {
		if !a.At.Equal(wantAt[i]) {
			t.Errorf("history[%d].At = %s, want %s", i, a.At, wantAt[i])
		}
	}
}
