package job_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// The claim of an idle queue: when the whole due set fits in the batch the
// engine takes it in one simple statement (claim_small.sql) instead of the
// per-tenant walk. These tests pin down that it takes exactly what the fair
// claim would have taken, and that it steps aside when more is due.

func staffID(t *testing.T, db *testdb.DB) int64 {
	t.Helper()
	var id int64
	if err := db.Admin.QueryRow(context.Background(),
		`INSERT INTO users (email, name, password_hash, staff_role) VALUES ('ops@x.test', 'Ops', 'x', 'support') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func ids(jobs []*job.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// TestSmallClaimTakesExactlyWhatIsDue: paused kinds, other queues, jobs
// scheduled ahead, dependents still waiting and rows another transaction
// holds are all left alone; what is taken comes in priority order; and a
// dependent becomes claimable once its prerequisite succeeded.
func TestSmallClaimTakesExactlyWhatIsDue(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	ten := newTenants(t, db, 2)
	e := newEngine(t, db, job.Config{})
	if err := e.Pause(ctx, job.PauseKind, "paused", "retry storm", staffID(t, db)); err != nil {
		t.Fatal(err)
	}
	enq := func(p job.EnqueueParams) int64 {
		if p.Payload == nil {
			p.Payload = json.RawMessage(`{}`)
		}
		return enqueueTenant(t, db, e, p).ID
	}
	later := time.Now().Add(time.Hour)
	low := enq(job.EnqueueParams{TenantID: ten[0], Kind: "k", Priority: 5})
	high := enq(job.EnqueueParams{TenantID: ten[1], Kind: "k", Priority: 1})
	pre := enq(job.EnqueueParams{TenantID: ten[0], Kind: "k", Priority: 3})
	dependent := enq(job.EnqueueParams{TenantID: ten[0], Kind: "k", Priority: 0, DependsOn: &pre})
	enq(job.EnqueueParams{TenantID: ten[1], Kind: "paused"})
	enq(job.EnqueueParams{TenantID: ten[1], Kind: "k", Queue: "other"})
	enq(job.EnqueueParams{TenantID: ten[0], Kind: "k", AvailableAt: &later})
	held := enq(job.EnqueueParams{TenantID: ten[1], Kind: "k"})
	tx, err := db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", held); err != nil {
		t.Fatal(err)
	}

	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	before := e.Stats()
	got, err := e.Claim(cctx, "w", 10)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if want := []int64{high, pre, low}; !slices.Equal(ids(got), want) {
		t.Fatalf("claimed %v, want %v (high, prerequisite, low priority)", ids(got), want)
	}
	st := e.Stats()
	if st.SmallClaims-before.SmallClaims != 1 || st.Claims-before.Claims != 1 {
		t.Fatalf("claims %d (small %d), want one small claim and no fair pass",
			st.Claims-before.Claims, st.SmallClaims-before.SmallClaims)
	}
	for _, j := range got {
		if j.Attempt != 1 || j.WorkerID != "w" || j.LeaseExpiresAt.IsZero() || !j.VerifyPayload() {
			t.Fatalf("claimed job not stamped like the fair claim does: %+v", j)
		}
	}
	if err := e.Complete(ctx, "w", pre); err != nil {
		t.Fatal(err)
	}
	got, err = e.Claim(cctx, "w", 10)
	if err != nil || !slices.Equal(ids(got), []int64{dependent}) {
		t.Fatalf("after its prerequisite succeeded: %v, %v; want the dependent %d", ids(got), err, dependent)
	}
	if st, _, _, _ := jobRow(t, db, held); st != "pending" {
		t.Fatalf("the row another transaction holds is %s", st)
	}
}

// TestSmallClaimStepsAsideForFairness: an idle engine's next claim, when
// more than a batch is due, is the fair one: the flood cannot crowd out a
// tenant's single job. A due set of exactly one batch is taken whole.
func TestSmallClaimStepsAsideForFairness(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	ten := newTenants(t, db, 2)
	e := newEngine(t, db, job.Config{BatchSize: 100})
	// Idle: the last claim came back short.
	if got, err := e.Claim(ctx, "w", 100); err != nil || len(got) != 0 {
		t.Fatalf("empty claim = %v, %v", got, err)
	}
	enqueueBulk(t, db, e, ten[0], "flood", 99)
	enqueueTenant(t, db, e, job.EnqueueParams{TenantID: ten[1], Kind: "one", Payload: json.RawMessage(`{}`)})
	before := e.Stats()
	got, err := e.Claim(ctx, "w", 100)
	if err != nil || len(got) != 100 || e.Stats().SmallClaims-before.SmallClaims != 1 {
		t.Fatalf("a due set of exactly one batch: %d jobs, %v, small claims %d", len(got), err, e.Stats().SmallClaims-before.SmallClaims)
	}
	// Idle again, then a flood and a late lone job: more than a batch due.
	if got, err := e.Claim(ctx, "w", 100); err != nil || len(got) != 0 {
		t.Fatalf("empty claim = %v, %v", got, err)
	}
	enqueueBulk(t, db, e, ten[0], "flood", 500)
	lone := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: ten[1], Kind: "one", Payload: json.RawMessage(`{}`)}).ID
	before = e.Stats()
	got, err = e.Claim(ctx, "w", 100)
	if err != nil || len(got) != 100 {
		t.Fatalf("claim = %d, %v", len(got), err)
	}
	if !slices.Contains(ids(got), lone) {
		t.Fatal("the lone tenant's job waited behind the flood: the idle path was not fair")
	}
	if d := e.Stats().SmallClaims - before.SmallClaims; d != 0 {
		t.Fatalf("%d small claims with more than a batch due", d)
	}
}

// TestClaimStopsWhenEverythingDueWasSeen: a fair pass that walked every
// tenant with due work from the start and filled nobody's share is not
// followed by another pass (it would find nothing).
func TestClaimStopsWhenEverythingDueWasSeen(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	ten := newTenants(t, db, 3)
	e := newEngine(t, db, job.Config{})
	for _, id := range ten {
		enqueueBulk(t, db, e, id, "k", 40)
	}
	got, err := e.Claim(ctx, "w", 100) // more than a batch due: fair
	if err != nil || len(got) != 100 {
		t.Fatalf("first claim = %d, %v", len(got), err)
	}
	before := e.Stats()
	got, err = e.Claim(ctx, "w", 100) // the last 20, over three tenants
	if err != nil || len(got) != 20 {
		t.Fatalf("second claim = %d, %v", len(got), err)
	}
	if d := e.Stats().Claims - before.Claims; d != 1 {
		t.Fatalf("%d claim statements for the rest of the queue, want 1", d)
	}
}

// TestRoundRobinPassesTenantsWithOnlyPausedWork: tenants whose due jobs
// are all of a paused kind are walked but give nothing; the round robin
// must move past them rather than start over, or a run of such tenants
// (an automatic pause across many tenants) would starve everyone after
// them.
func TestRoundRobinPassesTenantsWithOnlyPausedWork(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	ten := newTenants(t, db, 8)
	e := newEngine(t, db, job.Config{})
	if err := e.Pause(ctx, job.PauseKind, "paused", "failing", staffID(t, db)); err != nil {
		t.Fatal(err)
	}
	for i, id := range ten {
		kind := "k"
		if i < 4 { // the lowest tenant ids, walked first
			kind = "paused"
		}
		enqueueBulk(t, db, e, id, kind, 2)
	}
	got, err := e.Claim(ctx, "w", 2)
	if err != nil || len(got) != 2 {
		t.Fatalf("claim = %d jobs, %v; want 2 from the tenants after the paused ones", len(got), err)
	}
	for _, j := range got {
		if j.Kind != "k" {
			t.Fatalf("claimed a paused kind: %+v", j)
		}
	}
}

// TestTwoEnginesShareSmallClaims: two engines with their own pools claim
// the same small due sets at the same moment, round after round; SKIP
// LOCKED hands each job to exactly one of them.
func TestTwoEnginesShareSmallClaims(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	ten := newTenants(t, db, 3)
	pool2, err := database.OpenSystem(ctx, db.URL, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool2.Close)
	engines := []*job.Engine{newEngine(t, db, job.Config{}), newEngine(t, db, job.Config{Pool: pool2})}
	var small int64
	for round := range 30 {
		var want []int64
		for i := range 9 {
			want = append(want, enqueueTenant(t, db, engines[0], job.EnqueueParams{
				TenantID: ten[i%3], Kind: "k", Payload: json.RawMessage(fmt.Sprintf(`{"r":%d}`, round))}).ID)
		}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			got   []int64
			start = make(chan struct{})
		)
		for i, e := range engines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				jobs, err := e.Claim(ctx, fmt.Sprintf("w%d", i), 100)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				got = append(got, ids(jobs)...)
				mu.Unlock()
			}()
		}
		close(start)
		wg.Wait()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: the two engines claimed %v, want each of %v exactly once", round, got, want)
		}
	}
	for _, e := range engines {
		small += e.Stats().SmallClaims
	}
	if small == 0 {
		t.Fatal("no claim took the small path: the test did not test it")
	}
}

// TestSmallClaimReadsAtMostABatch: the idle path's statement runs as a
// prepared statement (a cached plan, which is the point: no planning per
// claim), so its plan must stay bounded by the batch whatever the planner
// knows: with a generic plan too, beside 20,000 due jobs and 20,000
// finished ones, it reads the due-time index and the primary key only and
// a number of pages that does not grow with the table.
func TestSmallClaimReadsAtMostABatch(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenants(t, db, 1)[0]
	seed := func(n int, state string) {
		t.Helper()
		_, err := db.Admin.Exec(ctx, `
INSERT INTO jobs (tenant_id, kind, queue, state, payload, attempt, max_attempts, available_at, created_at,
    trace_id, requested_at, payload_hash, attempted_at, finished_at, worker_id)
SELECT $1::bigint, 'noop', 'default', $3, jsonb_build_object('g', g), 0, 3,
    now() - interval '1 hour', now() - interval '1 hour', md5(g::text), now(), sha256(convert_to(g::text, 'UTF8')),
    CASE WHEN $3 = 'pending' THEN NULL ELSE now() END, CASE WHEN $3 = 'pending' THEN NULL ELSE now() END,
    CASE WHEN $3 = 'pending' THEN NULL ELSE 'w' END
  FROM generate_series(1, $2::int) g`, tenant, n, state)
		if err != nil {
			t.Fatalf("seed %s: %v", state, err)
		}
	}
	prepared := 0
	measure := func(generic bool) (blocks float64, plan string) {
		t.Helper()
		tx, err := db.Admin.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		mode := "force_custom_plan"
		if generic {
			mode = "force_generic_plan"
		}
		if _, err := tx.Exec(ctx, "SET LOCAL ROLE jejak_system; SET LOCAL plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		// PREPARE outlives the transaction: a name per call.
		prepared++
		name := fmt.Sprintf("small_claim_%d", prepared)
		if _, err := tx.Exec(ctx, "PREPARE "+name+" AS "+job.ClaimSmallSQL); err != nil {
			t.Fatal(err)
		}
		defer tx.Exec(ctx, "DEALLOCATE "+name) //nolint:errcheck // before the rollback (deferred first)
		var raw []byte
		if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE `+name+`(NULL, 'default', 'plan-test', 100, 30, '{}')`).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var out []struct {
			Plan map[string]any `json:"Plan"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"Shared Hit Blocks", "Shared Read Blocks"} {
			v, _ := out[0].Plan[k].(float64)
			blocks += v
		}
		return blocks, string(raw)
	}
	check := func(label string, generic bool, maxBlocks float64) {
		t.Helper()
		blocks, plan := measure(generic)
		if strings.Contains(plan, `"Seq Scan"`) {
			t.Errorf("%s: the small claim scans a table sequentially:\n%s", label, plan)
		}
		for _, ix := range regexp.MustCompile(`"Index Name": "([a-z_]+)"`).FindAllStringSubmatch(plan, -1) {
			// jobs_id_idx (id) WHERE state <> 'running' finds pending jobs
			// by id as well as the primary key does.
			if ix[1] != "jobs_pending_at_idx" && ix[1] != "jobs_pkey" && ix[1] != "jobs_id_idx" {
				t.Errorf("%s: the small claim reads %s", label, ix[1])
			}
		}
		if blocks > maxBlocks {
			t.Errorf("%s: the small claim read %.0f buffers (at most %.0f expected)", label, blocks, maxBlocks)
		}
		t.Logf("%s: %.0f buffers", label, blocks)
	}
	seed(50, "pending")
	if _, err := db.Admin.Exec(ctx, "ANALYZE jobs"); err != nil {
		t.Fatal(err)
	}
	custom, _ := measure(false)
	generic, _ := measure(true)
	seed(20000, "succeeded")
	seed(20000, "pending")
	// A batch of 100 looks at 101 due jobs (and claims nothing: too many
	// are due): the pages read must stay near what 50 due jobs cost.
	check("custom plan, statistics from a small table", false, 2*custom+200)
	check("generic plan, statistics from a small table", true, 2*generic+200)
	if _, err := db.Admin.Exec(ctx, "ANALYZE jobs"); err != nil {
		t.Fatal(err)
	}
	check("custom plan", false, 2*custom+200)
	check("generic plan", true, 2*generic+200)
}

// TestIdlePoolClaimsOncePerWake: an idle pool woken by NOTIFY claims the
// new job with one claim and goes back to sleep; it does not claim again
// at once (that claim would only compete with the handler it just
// started). Without a tenant cap the claim is the small one; with a cap
// (the webhook deliveries' engine) it is the fair walk, which has seen
// every due job when it ends early. Polling is off and the producer sleeps
// as soon as nothing is due (no warm period, whose claims every few
// milliseconds would count here), so every claim here is a NOTIFY's.
func TestIdlePoolClaimsOncePerWake(t *testing.T) {
	t.Parallel()
	t.Run("small claim", func(t *testing.T) { t.Parallel(); idlePoolClaimsOncePerWake(t, 0) })
	t.Run("fair walk under a tenant cap", func(t *testing.T) { t.Parallel(); idlePoolClaimsOncePerWake(t, 16) })
}

func idlePoolClaimsOncePerWake(t *testing.T, tenantCap int) {
	db := testdb.New(t)
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{Workers: 2, PollInterval: time.Hour, TenantConcurrency: tenantCap})
	e.SetWarm(-1, 0)
	ran := make(chan int64, 1)
	e.Register("ping", func(ctx context.Context, j *job.Job) error { ran <- j.ID; return nil }, job.KindOptions{})
	// The test's own LISTEN counts every notification the engine's will
	// get: both listen before any is sent (only the pings send them, and
	// the engine's listener has woken the loop once, at its LISTEN, before
	// the first).
	notifications := db.Listen(t, "jejak_jobs")
	startEngine(t, e)
	testwait.Within(t, 10*time.Second, "the engine listening", func() bool { return e.Stats().Notifications > 0 })
	ping := func() {
		t.Helper()
		id := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "ping", Payload: json.RawMessage(`{}`)}).ID
		select {
		case got := <-ran:
			if got != id {
				t.Fatalf("ran %d, want %d", got, id)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("job not started: NOTIFY did not wake the pool")
		}
	}
	ping() // start-up claims (the first poll, the LISTEN wake-up) are behind us
	// The producer marks itself asleep after start-up (then claims once
	// more, closing the race with inserts that saw it awake); that
	// transition must be behind us too, so wait for the mark, and let one
	// more job through uncounted.
	testwait.Within(t, 10*time.Second, "producer marked asleep", func() bool {
		var asleep bool
		err := db.Admin.QueryRow(context.Background(),
			"SELECT coalesce(bool_and(asleep), false) FROM wake_listeners WHERE channel = 'jejak_jobs'").Scan(&asleep)
		return err == nil && asleep
	})
	ping()
	// Every wake-up sent so far must have reached the loop, and been
	// taken, before the count starts. The claim that takes a job need not
	// be the one its NOTIFY caused: an earlier wake-up (the LISTEN's own,
	// one that arrived late under load) may take it first, and the job's
	// NOTIFY, handed over after the loop parked again, would wake it
	// inside the count for nothing. So: every notification sent so far
	// (and a marker after them) handed to the loop, the LISTEN's own
	// wake-up too, and none left for it to take.
	sent := int64(1 + notifications.Count(t) + 1)
	testwait.Within(t, 10*time.Second, "every notification handed to the loop", func() bool {
		return e.Stats().Notifications >= sent
	})
	waitIdle(t, e)
	before := e.Stats()
	const n = 6
	for range n {
		ping()
		// A job enqueued while the producer is still finishing the
		// previous claim is a second wake-up during a claim, which the
		// Sleeper rightly takes for a stream of jobs (it marks itself
		// awake, claims, then marks itself asleep and claims once more):
		// each job is enqueued only once the loop waits again.
		waitIdle(t, e)
	}
	st := e.Stats()
	// Exactly one claim per job: claiming again after each small claim
	// would make it 2n. Under a cap a completion also wakes the producer
	// (it may free a capped tenant's place), so a job costs its NOTIFY's
	// claim and its completion's, and now and then one more when the
	// producer renews its asleep mark (slow machines, the race detector);
	// claiming again at once after a walk that saw every due job made it
	// at least three a job.
	if d, most := st.Claims-before.Claims, map[bool]int64{true: n, false: 3*n - 1}[tenantCap == 0]; d > most || d < n {
		t.Fatalf("%d claims (%d small, %d wake-ups) for %d jobs enqueued one at a time, want %d to %d",
			d, st.SmallClaims-before.SmallClaims, st.Notifications-before.Notifications, n, n, most)
	}
	if d := st.SmallClaims - before.SmallClaims; tenantCap == 0 && d < n || tenantCap > 0 && d != 0 {
		t.Fatalf("%d of the claims took the small path, want %s", d, map[bool]string{true: "all", false: "none"}[tenantCap == 0])
	}
}
