package job_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// The fair claim must read about the same number of pages however many
// finished jobs the tenants hold. Its tenant walk probes an index that
// leads with tenant_id once per tenant; jobs_tenant_idx led with
// tenant_id too, held finished jobs, and was smaller, so a walk the
// planner was free to run on it stepped over every succeeded job of each
// tenant (50k buffers and 80 ms per claim at 70k finished jobs, under a
// continuous load). The primary key (tenant_id, id) is such an index now.
// Buffers, unlike time, do not depend on the machine.
func TestClaimReadsLittleBesideManyFinishedJobs(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenants := newTenants(t, db, 10)
	// Statistics as a burst leaves them: analysed while nearly every job
	// was pending, and 5,000 of each tenant's 5,010 jobs finished since
	// (autovacuum has not caught up). The planner then believes most rows
	// of jobs_tenant_idx are due and that the next tenant is one step away.
	withoutAutovacuum(t, db)
	seedPendingAndAnalyze(t, db, tenants, 5010)
	finishJobs(t, db, 5000)

	// $1 now, $2 queue, $3 worker, $4 batch, $5 lease, $6 tenant cursor,
	// $7 max tenants, $8 min share, $9 running cap, $10 fair, $11 max share,
	// $12 and $13 the slot (every tenant), $14 paused
	root, plan := explainPlan(t, db, nil, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+job.ClaimSQL, pgx.QueryExecModeExec,
		nil, "default", "plan-test", 50, 30.0, int64(0), 1000, 1, 0, true, 50, 1, 0, []string{})
	blocks := buffersRead(root)
	// The walk reads jobs_claim_idx only (the final update reaches the
	// picked rows by primary key, which is fine).
	if ix := indexesRead(findSubplan(root, "CTE tenant_walk")); len(ix) == 0 || slices.ContainsFunc(ix, func(n string) bool { return n != "jobs_claim_idx" }) {
		t.Errorf("the claim's tenant walk reads %v, want jobs_claim_idx only:\n%s", ix, plan)
	}
	// The claim index still holds the finished jobs' old entries (no
	// vacuum yet), and the first scan past them visits their heap rows once
	// to learn they are dead: about 3,000 pages here. Walking the finished
	// jobs through jobs_tenant_idx read about 94,000.
	if blocks > 10000 {
		t.Errorf("a claim of 50 over 10 tenants read %.0f buffers beside 50,000 finished jobs; the walk is stepping over them", blocks)
	}
	t.Logf("claim of 50 over 10 tenants beside 50,000 finished jobs: %.0f buffers", blocks)
}

// With no kind paused the engine runs the fair claim as a prepared
// statement, and PostgreSQL settles on its generic plan after a few
// executions. That plan must take each tenant's head jobs in index order
// and stop at the tenant's share. With the paused-kinds filter in the
// statement, a table holding one kind (as a burst of one job type leaves
// it) made the generic plan expect almost no rows: it read every pending
// job of each tenant through a bitmap and sorted them, 15x slower.
func TestClaimGenericPlanTakesTenantHeadsInIndexOrder(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenants := newTenants(t, db, 4)
	seedPendingAndAnalyze(t, db, tenants, 5000)
	root, plan := explainPlan(t, db,
		[]string{"SET LOCAL plan_cache_mode = force_generic_plan", "PREPARE claim_generic AS " + job.ClaimAnyKindSQL},
		`EXPLAIN (FORMAT JSON) EXECUTE claim_generic(NULL, 'default', 'plan-test', 100, 30.0, 0, 100, 0, 0, true, 100, 1, 0)`)
	cand := findSubplan(root, "CTE candidates")
	if cand == nil {
		t.Fatalf("no candidates CTE in the plan:\n%s", plan)
	}
	lateral := nodeTypes(cand)
	if !slices.Contains(lateral, "Index Scan") || slices.Contains(lateral, "Bitmap Heap Scan") {
		t.Errorf("the generic plan's candidates scan is %v, want an Index Scan of jobs_claim_idx in key order:\n%s", lateral, plan)
	}
	// One sort ranks the whole candidate set; a second one would be a
	// tenant's pending jobs sorted because the index order was not used.
	if n := len(slices.DeleteFunc(slices.Clone(lateral), func(t string) bool { return t != "Sort" })); n != 1 {
		t.Errorf("the generic plan's candidates sort %d times, want once (the ranking):\n%s", n, plan)
	}
}

// explainPlan runs setup and then an EXPLAIN (FORMAT JSON) statement in
// one system transaction and returns the plan's root node and the raw JSON.
func explainPlan(t *testing.T, db *testdb.DB, setup []string, explain string, args ...any) (map[string]any, []byte) {
	t.Helper()
	ctx := context.Background()
	var plan []byte
	err := database.InTx(ctx, db.System, func(tx pgx.Tx) error {
		for _, q := range setup {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, explain, args...).Scan(&plan)
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &out); err != nil || len(out) != 1 {
		t.Fatalf("plan %s: %v", plan, err)
	}
	return out[0].Plan, plan
}

// findSubplan is the first node under root with that subplan name, or nil.
func findSubplan(root map[string]any, name string) map[string]any {
	for _, n := range testdb.PlanNodes(root) {
		if sn, _ := n["Subplan Name"].(string); sn == name {
			return n
		}
	}
	return nil
}

// nodeTypes lists the node types of the plan under node, node included.
func nodeTypes(node map[string]any) []string {
	var out []string
	for _, n := range testdb.PlanNodes(node) {
		out = append(out, n["Node Type"].(string))
	}
	return out
}

// indexesRead lists the indexes the plan under node reads (none for nil).
func indexesRead(node map[string]any) []string {
	if node == nil {
		return nil
	}
	var out []string
	for _, n := range testdb.PlanNodes(node) {
		if ix, ok := n["Index Name"].(string); ok {
			out = append(out, ix)
		}
	}
	return out
}

// buffersRead is what a plan node read from shared buffers (hit or read).
func buffersRead(node map[string]any) float64 {
	hit, _ := node["Shared Hit Blocks"].(float64)
	read, _ := node["Shared Read Blocks"].(float64)
	return hit + read
}

// withoutAutovacuum keeps autovacuum off the job table, so a test's
// statistics stay those it took.
func withoutAutovacuum(t *testing.T, db *testdb.DB) {
	t.Helper()
	if _, err := db.Admin.Exec(context.Background(), "ALTER TABLE jobs SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
}

// finishJobs marks each tenant's first n jobs (in id order) succeeded, as
// workers would have left them.
func finishJobs(t *testing.T, db *testdb.DB, n int) {
	t.Helper()
	_, err := db.Admin.Exec(context.Background(), `
UPDATE jobs SET state = 'succeeded', attempt = 1, attempted_at = now(), finished_at = now(), worker_id = 'w'
 WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY tenant_id ORDER BY id) AS n FROM jobs) x
               WHERE n <= $1)`, n)
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
}

// seedPendingAndAnalyze is seedPending, then ANALYZE.
func seedPendingAndAnalyze(t *testing.T, db *testdb.DB, tenants []int64, n int) {
	t.Helper()
	seedPending(t, db, tenants, n)
	if _, err := db.Admin.Exec(context.Background(), "ANALYZE jobs"); err != nil {
		t.Fatal(err)
	}
}

// seedPending writes n due pending jobs of one kind per tenant straight
// into the table (as the owner: faster than enqueueing).
func seedPending(t *testing.T, db *testdb.DB, tenants []int64, n int) {
	t.Helper()
	ctx := context.Background()
	for _, tid := range tenants {
		_, err := db.Admin.Exec(ctx, `
INSERT INTO jobs (tenant_id, kind, queue, state, payload, attempt, max_attempts, available_at, created_at,
    trace_id, requested_at, payload_hash)
SELECT $1::bigint, 'noop', 'default', 'pending', jsonb_build_object('g', g), 0, 3,
    now() - interval '1 hour', now() - interval '1 hour', md5(g::text), now(), sha256(convert_to(g::text, 'UTF8'))
  FROM generate_series(1, $2::int) g`, tid, n)
		if err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
}

// Statistics taken while nothing was pending (a quiet queue, all its jobs
// finished) and then a burst: the planner believes next to no job is
// pending, and the fair claim read every due job through
// jobs_pending_at_idx and sorted them for each tenant its walk visits,
// instead of probing jobs_claim_idx. The statistics refresh the
// maintenance leader runs every pass must see that the table holds far
// more unfinished jobs than its statistics believe, though it was just
// analyzed and has not doubled, and analyze it.
func TestClaimWalksTheClaimIndexAfterABurstIntoAQuietQueue(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenants := newTenants(t, db, 10)
	withoutAutovacuum(t, db)
	seedPending(t, db, tenants, 3000)
	finishJobs(t, db, 3000)
	if _, err := db.Admin.Exec(ctx, "ANALYZE jobs"); err != nil {
		t.Fatal(err)
	}
	// A third of what it holds: far short of the doubling that has a
	// table analyzed again within a naptime.
	seedPending(t, db, tenants, 1000)
	if err := job.RebuildCounts(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	// The burst's inserts reach the statistics the refresh reads when
	// their sessions next report (within a second).
	testwait.For(t, "the burst in the table's change counter", func() bool {
		var n int64
		if err := db.Admin.QueryRow(ctx, "SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = 'jobs'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n >= 10000
	})

	tables, err := job.RefreshStatistics(ctx, db.System)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tables, "jobs") {
		t.Fatalf("the refresh analyzed %v, want jobs: 10,000 unfinished jobs where its statistics believe none", tables)
	}
	root, plan := explainPlan(t, db, nil, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+job.ClaimSQL, pgx.QueryExecModeExec,
		nil, "default", "plan-test", 50, 30.0, int64(0), 1000, 1, 0, true, 50, 1, 0, []string{})
	if ix := indexesRead(findSubplan(root, "CTE tenant_walk")); len(ix) == 0 || slices.ContainsFunc(ix, func(n string) bool { return n != "jobs_claim_idx" }) {
		t.Errorf("the claim's tenant walk reads %v, want jobs_claim_idx only:\n%s", ix, plan)
	}
	blocks := buffersRead(root)
	t.Logf("claim of 50 over 10 tenants after the burst, analyzed: %.0f buffers", blocks)
	// Analyzed, the belief is the truth: the next pass leaves the table.
	if again, err := job.RefreshStatistics(ctx, db.System); err != nil || slices.Contains(again, "jobs") {
		t.Fatalf("the next pass analyzed %v (%v): jobs was just analyzed with its backlog", again, err)
	}
}
