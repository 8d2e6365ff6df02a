package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// stages returns the job's audit events as "stage/worker?/attempt" in trail
// order, read the way the tenant reads them (app pool, tenant scope).
func stages(t *testing.T, db *testdb.DB, tenantID, jobID int64) []string {
	t.Helper()
	rows, err := db.Admin.Query(context.Background(), `SELECT action, detail, trace_id FROM audit_events
		WHERE tenant_id = $1 AND job_id = $2 ORDER BY seq`, tenantID, jobID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var action, trace string
		var detail map[string]any
		if err := rows.Scan(&action, &detail, &trace); err != nil {
			t.Fatal(err)
		}
		if trace == "" {
			t.Errorf("%s of job %d has no trace id", action, jobID)
		}
		s := strings.TrimPrefix(action, "job.")
		if action != "job.queued" {
			if w, _ := detail["worker_id"].(string); w != "lifecycle-worker" {
				t.Errorf("%s of job %d: worker_id %v", action, jobID, detail["worker_id"])
			}
			if a, _ := detail["attempt"].(float64); a < 1 {
				t.Errorf("%s of job %d: attempt %v", action, jobID, detail["attempt"])
			}
		}
		out = append(out, s)
	}
	return out
}

// TestSensitiveKindsAuditEveryStage runs sensitive jobs through the worker
// pool: each stage lands in the tenant's trail with worker, attempt and
// trace; ordinary kinds write nothing there; the per-minute rollup counts
// both.
func TestSensitiveKindsAuditEveryStage(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{Workers: 2, WorkerID: "lifecycle-worker", PollInterval: 20 * time.Millisecond,
		Backoff: func(int) time.Duration { return 0 }})
	var flaky atomic.Int32 // attempts run on different worker goroutines
	e.Register("user.disable-access", func(ctx context.Context, j *job.Job) error {
		var p struct{ Mode string }
		_ = json.Unmarshal(j.Payload, &p)
		switch p.Mode {
		case "policy":
			return job.Policy(errors.New("approval revoked"))
		case "flaky":
			if flaky.Add(1) == 1 {
				return errors.New("directory timeout")
			}
		}
		return nil
	}, job.KindOptions{Sensitive: true, MaxAttempts: 3})
	e.Register("points.award", func(context.Context, *job.Job) error { return nil }, job.KindOptions{})

	enqueue := func(kind, mode string) int64 {
		return enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: kind,
			Payload: json.RawMessage(`{"mode":"` + mode + `"}`)}).ID
	}
	ok, policy, flakyID := enqueue("user.disable-access", "ok"), enqueue("user.disable-access", "policy"), enqueue("user.disable-access", "flaky")
	ordinary := enqueue("points.award", "")

	// A sensitive kind outside a transaction is refused before anything
	// is written: its queued event could not commit with it.
	if _, err := e.Enqueue(context.Background(), db.System, job.EnqueueParams{TenantID: tenant, Kind: "user.disable-access",
		Payload: json.RawMessage(`{}`)}); !errors.Is(err, job.ErrSensitiveNeedsTx) {
		t.Fatalf("enqueue outside a tx: %v", err)
	}
	if n := countState(t, db, job.StatePending); n != 4 {
		t.Fatalf("%d pending jobs, want the 4 enqueued in transactions", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop(context.Background()) })
	// One statement: two separate counts can miss a job that fails (running
	// -> pending for its retry) between them.
	testwait.Within(t, 20*time.Second, "all jobs finished", func() bool {
		var n int
		if err := db.Admin.QueryRow(context.Background(), "SELECT count(*) FROM jobs WHERE state IN ('pending', 'running')").Scan(&n); err != nil {
			t.Fatalf("count unfinished: %v", err)
		}
		return n == 0
	})

	want := map[int64]string{
		ok:       "queued claimed started succeeded",
		policy:   "queued claimed started rejected dead_lettered",
		flakyID:  "queued claimed started failed retried claimed started succeeded",
		ordinary: "",
	}
	for id, w := range want {
		if got := strings.Join(stages(t, db, tenant, id), " "); got != w {
			t.Errorf("job %d stages:\n got  %q\n want %q", id, got, w)
		}
	}

	// The rollup the overview charts: 3 succeeded (ok, flaky, ordinary),
	// 1 retried failure, 1 dead.
	var succeeded, failed, dead int
	if err := db.Admin.QueryRow(context.Background(), `SELECT coalesce(sum(succeeded),0), coalesce(sum(failed),0), coalesce(sum(dead),0)
		FROM job_stats_minute WHERE tenant_id = $1`, tenant).Scan(&succeeded, &failed, &dead); err != nil {
		t.Fatal(err)
	}
	if succeeded != 3 || failed != 2 || dead != 1 {
		t.Fatalf("rollup succeeded=%d failed=%d dead=%d, want 3 2 1 (a dead letter counts as a failure too)", succeeded, failed, dead)
	}
}

// TestReplayOutcomeIsInTheTrail: a job an operator replayed records how
// the replay ended once it has, under its trace: succeeded when the worker
// completes it, dead again (with the error) when its last attempt fails or
// its worker vanishes; a failure that will be retried records nothing; a
// job never replayed records nothing.
func TestReplayOutcomeIsInTheTrail(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenants(t, db, 1)[0]
	clk := clock.NewFrozen(time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC))
	e := newEngine(t, db, job.Config{Clock: clk, WorkerID: "lifecycle-worker", LeaseDuration: time.Minute,
		Backoff: func(int) time.Duration { return 0 }})
	// A sensitive kind is registered, as in the application: the rescue
	// then locks and records the jobs it must.
	e.Register("user.disable-access", func(context.Context, *job.Job) error { return nil }, job.KindOptions{Sensitive: true})
	e.Register("k", func(_ context.Context, j *job.Job) error {
		var p struct{ Mode string }
		_ = json.Unmarshal(j.Payload, &p)
		switch {
		case p.Mode == "fail" && j.Attempt < 3:
			return errors.New("gateway timeout")
		case p.Mode == "fail":
			return job.Permanent(errors.New("card declined"))
		}
		return nil
	}, job.KindOptions{MaxAttempts: 3})
	enqueue := func(mode string, maxAttempts int) int64 {
		return enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "k", MaxAttempts: maxAttempts,
			Payload: json.RawMessage(`{"mode":"` + mode + `"}`)}).ID
	}
	// lost: claimed by a worker that vanishes on its only attempt.
	lost := enqueue("ok", 1)
	stamp := func(ids ...int64) { // as an operator's retry leaves them (console.Act)
		if _, err := db.Admin.Exec(context.Background(), `UPDATE jobs SET replayed_by = 42 WHERE id = ANY($1)`, ids); err != nil {
			t.Fatal(err)
		}
	}
	stamp(lost)
	gone, err := e.Claim(context.Background(), "gone-worker", 1)
	if err != nil || len(gone) != 1 || gone[0].ID != lost || gone[0].ReplayedBy == nil || *gone[0].ReplayedBy != 42 {
		t.Fatalf("the claim does not carry the replay: %+v %v", gone, err)
	}
	clk.Advance(2 * time.Minute)
	if n, err := e.RescueExpired(context.Background()); err != nil || n != 1 {
		t.Fatalf("rescue: %d %v", n, err)
	}
	ok, fail, plain := enqueue("ok", 3), enqueue("fail", 3), enqueue("ok", 3)
	stamp(ok, fail)
	for i := 0; i < 5 && work(t, e) > 0; i++ {
	}
	if n := countState(t, db, job.StatePending) + countState(t, db, job.StateRunning); n != 0 {
		t.Fatalf("%d jobs unfinished", n)
	}

	trace := func(id int64) string {
		var tr string
		if err := db.Admin.QueryRow(context.Background(), `SELECT trace_id FROM jobs WHERE id = $1`, id).Scan(&tr); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	outcomes := func(id int64) (actions []string, details []map[string]any) {
		rows, err := db.Admin.Query(context.Background(), `SELECT action, detail, trace_id FROM audit_events
			WHERE tenant_id = $1 AND job_id = $2 AND action LIKE 'job.replay_%' ORDER BY id`, tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var a, tr string
			var d map[string]any
			if err := rows.Scan(&a, &d, &tr); err != nil {
				t.Fatal(err)
			}
			if tr != trace(id) {
				t.Errorf("%s of job %d under trace %q, want the job's %q", a, id, tr, trace(id))
			}
			actions, details = append(actions, a), append(details, d)
		}
		return actions, details
	}
	if a, d := outcomes(ok); strings.Join(a, " ") != "job.replay_succeeded" || d[0]["replayed_by"] != "42" {
		t.Errorf("ok: %v %v", a, d)
	}
	if a, d := outcomes(fail); strings.Join(a, " ") != "job.replay_failed" || d[0]["error"] != "card declined" ||
		d[0]["class"] != "permanent" || d[0]["attempt"] != float64(3) {
		t.Errorf("fail (two retried failures, then dead): %v %v", a, d)
	}
	if a, d := outcomes(lost); strings.Join(a, " ") != "job.replay_failed" ||
		!strings.Contains(d[0]["error"].(string), "lease expired: worker gone-worker") {
		t.Errorf("lost: %v %v", a, d)
	}
	if a, _ := outcomes(plain); len(a) != 0 {
		t.Errorf("a job never replayed recorded %v", a)
	}
}
