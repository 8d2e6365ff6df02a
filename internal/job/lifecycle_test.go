package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
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
	waitFor(t, 20*time.Second, "all jobs finished", func() bool {
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
