package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
)

// countsMatchJobs fails unless the maintained counts (job_counts plus the
// deltas not folded yet, and job_dead_groups) equal a recount of jobs.
func countsMatchJobs(t *testing.T, db *testdb.DB, when string) {
	t.Helper()
	read := func(sql string) map[string]string {
		t.Helper()
		rows, err := db.Admin.Query(context.Background(), sql)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			out[k] = v
		}
		if rows.Err() != nil {
			t.Fatalf("%s: %v", when, rows.Err())
		}
		return out
	}
	maintained := read(`SELECT tenant_id || '/' || kind, sum(unfinished)::text FROM (
		SELECT tenant_id, kind, unfinished FROM job_counts UNION ALL
		SELECT tenant_id, kind, unfinished FROM job_count_deltas) x
		GROUP BY 1 HAVING sum(unfinished) <> 0`)
	recounted := read(`SELECT tenant_id || '/' || kind, count(*)::text FROM jobs
		WHERE state IN ('pending', 'running') GROUP BY 1`)
	if !reflect.DeepEqual(maintained, recounted) {
		t.Fatalf("%s: unfinished counts %v, jobs table says %v", when, maintained, recounted)
	}
	groups := read(`SELECT tenant_id || '/' || kind || '/' || error_class, n || ' ' || flagged
		FROM job_dead_groups WHERE n <> 0 OR flagged <> 0`)
	regrouped := read(`SELECT tenant_id || '/' || kind || '/' || coalesce(error_class, ''),
		count(*) || ' ' || count(*) FILTER (WHERE flagged) FROM jobs WHERE state = 'dead' GROUP BY 1`)
	if !reflect.DeepEqual(groups, regrouped) {
		t.Fatalf("%s: dead-letter groups %v, jobs table says %v", when, groups, regrouped)
	}
}

// TestCountsFollowEveryTransition: the counts the staff pages read are
// written by the statements that move jobs (enqueue, a skipped duplicate,
// claim, completion, retryable and final failures, a cancel, lease
// rescue, prune),
// and stay equal to a recount of the jobs table through each step and
// through the leader's fold.
func TestCountsFollowEveryTransition(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenants := newTenants(t, db, 2)
	clk := clock.NewFrozen(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
	e := newEngine(t, db, job.Config{Clock: clk, Retention: time.Hour, DeadRetention: time.Hour, LeaseDuration: time.Minute})
	ctx := context.Background()
	countsMatchJobs(t, db, "empty")

	for i := 0; i < 5; i++ {
		enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenants[0], Kind: "a", Payload: json.RawMessage(`{}`),
			IdempotencyKey: fmt.Sprint("key-", i%4)})
	}
	enqueueBulk(t, db, e, tenants[1], "b", 4)
	enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenants[1], Kind: "once", Payload: json.RawMessage(`{}`), MaxAttempts: 1})
	countsMatchJobs(t, db, "after enqueue (one duplicate key skipped)")

	js, err := e.Claim(ctx, "w", 100)
	if err != nil || len(js) != 9 {
		t.Fatalf("claim: %d %v", len(js), err)
	}
	countsMatchJobs(t, db, "after claim")
	byKind := map[string][]*job.Job{}
	for _, j := range js {
		byKind[j.Kind] = append(byKind[j.Kind], j)
	}
	for _, j := range byKind["a"][:2] {
		if err := e.Complete(ctx, "w", j.ID); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		j    *job.Job
		err  error
		want job.State
	}{
		{byKind["a"][2], job.Permanent(errors.New("bad payload")), job.StateDead},
		{byKind["a"][3], job.Policy(errors.New("approval revoked")), job.StateDead},
		{byKind["b"][0], errors.New("timeout"), job.StatePending},
		{byKind["b"][1], job.Policy(errors.New("expired")), job.StateDead},
	}
	for _, s := range steps {
		if st, err := e.Fail(ctx, "w", s.j.ID, s.err); err != nil || st != s.want {
			t.Fatalf("fail %d: %s %v, want %s", s.j.ID, st, err, s.want)
		}
	}
	countsMatchJobs(t, db, "after completions and failures")
	// A cancel from any statement (by hand, a dependency that died)
	// leaves the unfinished count through the row trigger.
	if _, err := db.System.Exec(ctx, "UPDATE jobs SET state = 'cancelled', finished_at = $2 WHERE id = $1", byKind["b"][0].ID, clk.Now()); err != nil {
		t.Fatal(err)
	}
	countsMatchJobs(t, db, "after cancelling a pending job")
	if _, err := e.FoldCounts(ctx); err != nil {
		t.Fatal(err)
	}
	countsMatchJobs(t, db, "after a fold")

	// The "once" job and two "b" jobs are still held; their leases lapse.
	clk.Advance(2 * time.Minute)
	if n, err := e.RescueExpired(ctx); err != nil || n != 3 {
		t.Fatalf("rescue: %d %v", n, err)
	}
	if countState(t, db, job.StateDead) != 4 {
		t.Fatalf("the single-attempt job did not die in rescue")
	}
	countsMatchJobs(t, db, "after rescue")

	clk.Advance(2 * time.Hour)
	if n, err := e.Prune(ctx); err != nil || n != 7 {
		t.Fatalf("prune: %d %v, want 2 succeeded + 1 cancelled + 4 dead", n, err)
	}
	countsMatchJobs(t, db, "after prune")
	if _, err := e.FoldCounts(ctx); err != nil {
		t.Fatal(err)
	}
	countsMatchJobs(t, db, "after the second fold")
	var deltas int
	if err := db.Admin.QueryRow(ctx, "SELECT count(*) FROM job_count_deltas").Scan(&deltas); err != nil || deltas != 0 {
		t.Fatalf("deltas left after a fold: %d %v", deltas, err)
	}
}
