package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// The claim's candidates (outbox_claimable) must cost a few pages per
// candidate whatever the backlog, even on a table that was never analysed,
// where the planner's estimates once made the claim hash the whole table
// and sort it. Buffers, unlike time, do not depend on the machine's load.
func TestClaimableReadsLittleOnAnUnanalysedBacklog(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	ctx := context.Background()
	// No statistics for the planner: the state of a new database.
	if _, err := db.Admin.Exec(ctx, "ALTER TABLE outbox_messages SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	backlog(t, db, tid, 20000, 2000)
	var pages int64
	if err := db.Admin.QueryRow(ctx, "SELECT pg_relation_size('outbox_messages') / 8192").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	ids, blocks := claimable(t, db, 10)
	if len(ids) != 10 {
		t.Fatalf("claimable = %v, want 10 ids", ids)
	}
	for i, id := range ids {
		if id != int64(i+1) {
			t.Fatalf("claimable = %v, want the 10 oldest (one per aggregate)", ids)
		}
	}
	if blocks > 200 || blocks >= float64(pages) {
		t.Fatalf("a claim of 10 touched %.0f buffers (table: %d pages); the plan is scanning the backlog", blocks, pages)
	}
	t.Logf("claim of 10 over 20,000 pending rows: %.0f buffers, table %d pages", blocks, pages)
}

// TestClaimableReadsLittleAfterChurn: a claim of a full batch reads a few
// buffers a message on a table whose aggregates' earlier messages were
// claimed and delivered while a transaction held its snapshot, so that
// none of their index entries could be killed yet (what a busy relay
// leaves behind it). Probing each candidate's key for the undelivered
// message before it passed every such entry of the key, a heap visit
// each: about 45,000 buffers here.
func TestClaimableReadsLittleAfterChurn(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	ctx := context.Background()
	holder, err := db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx) //nolint:errcheck // only held open
	if _, err := holder.Exec(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "SELECT 1"); err != nil { // takes the snapshot
		t.Fatal(err)
	}
	backlog(t, db, tid, 20000, 500)
	for _, step := range []string{
		"UPDATE outbox_messages SET state = 'processing', reserved_by = 'earlier', reserved_at = now()",
		"UPDATE outbox_messages SET state = 'delivered', processed_at = now()",
	} {
		if _, err := db.Admin.Exec(ctx, step); err != nil {
			t.Fatal(err)
		}
	}
	backlog(t, db, tid, 5000, 500)
	ids, blocks := claimable(t, db, 1000)
	if len(ids) != 1000 || ids[0] != 20001 || ids[999] != 21000 {
		t.Fatalf("claimable = %d ids from %v, want the 1,000 oldest pending, 20001-21000 (two of each aggregate)", len(ids), ids[:min(len(ids), 3)])
	}
	if blocks > 10000 {
		t.Fatalf("a claim of 1,000 after churn touched %.0f buffers: it probed the delivered messages' entries", blocks)
	}
	t.Logf("claim of 1,000 after 20,000 delivered under a held snapshot: %.0f buffers", blocks)
}

// TestClaimableCarriesAHeldKeyAcrossChunks: the walk reads a chunk of
// the batch's size at a time; a key held back in one chunk (its message
// not yet due) stays held in the next, so its later message is not taken
// and the claim fills with another aggregate's.
func TestClaimableCarriesAHeldKeyAcrossChunks(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	var first []string
	for i := range 40 {
		first = append(first, fmt.Sprintf("k%d", i))
	}
	ids := insertMessages(t, db, tid, first...)
	if _, err := db.Admin.Exec(context.Background(), `UPDATE outbox_messages SET available_at = now() + interval '1 hour' WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	later := insertMessages(t, db, tid, "k0", "z")
	got, _ := claimable(t, db, 40)
	want := append(ids[1:40:40], later[1])
	if !slices.Equal(got, want) {
		t.Fatalf("claimable(40) = %v, want k1-k39 and z %v (k0's second message waits for its first)", got, want)
	}
}

// TestClaimableTakesTheShallowestFirst: behind a backlog of runs (each
// aggregate's messages committed in a burst), a batch takes every
// aggregate's next messages before any run's later ones: the relay
// publishes a batch one message an aggregate at a time, so four runs of
// four took four round trips where four aggregates' next two take two.
func TestClaimableTakesTheShallowestFirst(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	var burst []string
	for _, a := range []string{"a", "b", "c", "d"} {
		burst = append(burst, a, a, a, a)
	}
	ids := insertMessages(t, db, tid, burst...)
	got, _ := claimable(t, db, 8)
	want := []int64{ids[0], ids[1], ids[4], ids[5], ids[8], ids[9], ids[12], ids[13]}
	if !slices.Equal(got, want) {
		t.Fatalf("claimable(8) = %v, want each aggregate's first two %v", got, want)
	}
}

// claimable runs outbox_claimable(lim, now()) twice in one transaction
// (the first call also fills the session's caches) and returns the second
// call's ids and the buffers it touched.
func claimable(t *testing.T, db *testdb.DB, lim int) ([]int64, float64) {
	t.Helper()
	ctx := context.Background()
	var ids []int64
	var blocks float64
	err := database.InTx(ctx, db.System, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT outbox_claimable($1, now())", lim).Scan(&ids); err != nil {
			return err
		}
		var plan []byte
		if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT outbox_claimable($1, now())", lim).Scan(&plan); err != nil {
			return err
		}
		var out []struct {
			Plan map[string]any `json:"Plan"`
		}
		if err := json.Unmarshal(plan, &out); err != nil {
			return err
		}
		for _, k := range []string{"Shared Hit Blocks", "Shared Read Blocks"} {
			v, _ := out[0].Plan[k].(float64)
			blocks += v
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids, blocks
}

// backlog adds n pending messages of tenant, message g (from 0, in id
// order) to aggregate g % aggregates.
func backlog(t *testing.T, db *testdb.DB, tenant int64, n, aggregates int) {
	t.Helper()
	if _, err := db.Admin.Exec(context.Background(), `INSERT INTO outbox_messages (tenant_id, event_type, aggregate_type, aggregate_id, payload, created_at, available_at)
		SELECT $1, 'project.updated', 'project', (g % $3)::text, jsonb_build_object('seq', g), now(), now()
		  FROM generate_series(0, $2 - 1) g ORDER BY g`, tenant, n, aggregates); err != nil {
		t.Fatal(err)
	}
}

// blockFronts marks each aggregate's oldest message as being published by
// another relay, so the rest of its messages wait.
func blockFronts(t *testing.T, db *testdb.DB) {
	t.Helper()
	if _, err := db.Admin.Exec(context.Background(), `UPDATE outbox_messages SET state = 'processing', reserved_by = 'other', reserved_at = now()
		WHERE id IN (SELECT min(id) FROM outbox_messages GROUP BY aggregate_id)`); err != nil {
		t.Fatal(err)
	}
}

// insertMessages adds one pending message per aggregate id given, in
// order, and returns their ids.
func insertMessages(t *testing.T, db *testdb.DB, tenant int64, aggregates ...string) []int64 {
	t.Helper()
	rows, err := db.Admin.Query(context.Background(), `INSERT INTO outbox_messages (tenant_id, event_type, aggregate_type, aggregate_id, payload, created_at, available_at)
		SELECT $1, 'project.updated', 'project', a, '{}', now(), now() FROM unnest($2::text[]) WITH ORDINALITY AS u(a, i) ORDER BY i
		RETURNING id`, tenant, aggregates)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}

// TestClaimableFindsHeadsBehindABlockedFront: when the oldest pending
// messages all wait behind their aggregates' messages in flight, the claim
// finds the aggregates that can move (the newest messages here), each with
// its run, without probing every blocked message, and still holds back a
// message behind a failed one and one behind an older message not yet due.
func TestClaimableFindsHeadsBehindABlockedFront(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	ctx := context.Background()
	backlog(t, db, tid, 20000, 200)
	blockFronts(t, db)
	held := insertMessages(t, db, tid, "failed", "failed", "later", "later")
	if _, err := db.Admin.Exec(ctx, `UPDATE outbox_messages SET state = 'failed' WHERE id = $1`, held[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, `UPDATE outbox_messages SET available_at = now() + interval '1 hour' WHERE id = $1`, held[2]); err != nil {
		t.Fatal(err)
	}
	var fresh []string
	for i := range 12 {
		fresh = append(fresh, fmt.Sprintf("new-%d", i))
	}
	free := insertMessages(t, db, tid, fresh...)
	// The first free aggregate's second message comes with its head.
	want := append(free[:9:9], insertMessages(t, db, tid, "new-0")...)

	ids, blocks := claimable(t, db, 10)
	if !slices.Equal(ids, want) {
		t.Fatalf("claimable = %v, want the oldest heads of the aggregates with nothing in flight, each with its run %v", ids, want)
	}
	// Probing each of the 19,800 blocked messages touches about 60,000.
	if blocks > 5000 {
		t.Fatalf("a claim of 10 touched %.0f buffers: it probed the blocked backlog", blocks)
	}
	t.Logf("claim of 10 behind 19,800 blocked messages: %.0f buffers", blocks)
}

// TestClaimableWithManyAggregatesBlocked: with more aggregates waiting than
// the claim lists, it walks the backlog and still finds the aggregates that
// can move, each with its run.
func TestClaimableWithManyAggregatesBlocked(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	backlog(t, db, tid, 2200, 1100)
	blockFronts(t, db)
	want := insertMessages(t, db, tid, "a", "b", "c", "a", "d")
	ids, _ := claimable(t, db, 10)
	if !slices.Equal(ids, want) {
		t.Fatalf("claimable = %v, want %v", ids, want)
	}
}

// TestClaimsTakeTurns: a claim waits while another claim's transaction is
// open, then takes what that one left. Concurrent claims (two loops on
// every replica) each probed the messages the other had just locked and
// split what one claim takes whole.
func TestClaimsTakeTurns(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	ctx := context.Background()
	ids := insertMessages(t, db, tid, "a", "b", "c", "d", "e", "f")

	first, err := db.System.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback(ctx) //nolint:errcheck // committed below
	var took []int64
	if err := first.QueryRow(ctx, "SELECT outbox_claimable(3, now())").Scan(&took); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(took, ids[:3]) {
		t.Fatalf("first claim = %v, want %v", took, ids[:3])
	}

	type result struct {
		ids []int64
		err error
	}
	second := make(chan result, 1)
	go func() {
		var r result
		r.err = db.System.QueryRow(ctx, "SELECT outbox_claimable(10, now())").Scan(&r.ids)
		second <- r
	}()
	testwait.For(t, "the second claim to wait for the first", func() bool {
		select {
		case r := <-second:
			t.Fatalf("the second claim returned %v (%v) while the first's transaction was open", r.ids, r.err)
		default:
		}
		var waiting bool
		if err := db.Admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'
			  AND query LIKE '%outbox_claimable(10%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	// What the relay's claim statement does with the ids: they are no
	// longer pending when the next claim looks.
	if _, err := first.Exec(ctx, `UPDATE outbox_messages SET state = 'processing', reserved_by = 'first', reserved_at = now()
		WHERE id = ANY($1)`, took); err != nil {
		t.Fatal(err)
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-second
	if r.err != nil || !slices.Equal(r.ids, ids[3:]) {
		t.Fatalf("second claim = %v (%v), want the rest %v", r.ids, r.err, ids[3:])
	}
}

// TestClaimableTakesEachAggregatesRun: a claim takes every waiting message
// of an aggregate that can move, in id order, and none of an aggregate
// whose older message is in flight, failed, or not yet due; a limit cuts a
// run, never skips into it, and takes the shallowest messages first.
func TestClaimableTakesEachAggregatesRun(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	ctx := context.Background()
	ids := insertMessages(t, db, tid, "run", "inflight", "failed", "later", "run", "inflight", "failed", "later", "run", "other")
	if _, err := db.Admin.Exec(ctx, `UPDATE outbox_messages SET state = 'processing', reserved_by = 'other', reserved_at = now() WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, `UPDATE outbox_messages SET state = 'failed' WHERE id = $1`, ids[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, `UPDATE outbox_messages SET available_at = now() + interval '1 hour' WHERE id = $1`, ids[3]); err != nil {
		t.Fatal(err)
	}
	got, _ := claimable(t, db, 10)
	if want := []int64{ids[0], ids[4], ids[8], ids[9]}; !slices.Equal(got, want) {
		t.Fatalf("claimable = %v, want the run's three messages and the other aggregate's %v", got, want)
	}
	// A smaller batch takes the aggregates' next messages first, then the
	// runs' next ones, and still only a prefix of each run.
	if got, _ = claimable(t, db, 2); !slices.Equal(got, []int64{ids[0], ids[9]}) {
		t.Fatalf("claimable(2) = %v, want the run's first and the other aggregate's %v", got, []int64{ids[0], ids[9]})
	}
	if got, _ = claimable(t, db, 3); !slices.Equal(got, []int64{ids[0], ids[4], ids[9]}) {
		t.Fatalf("claimable(3) = %v, want the run's first two and the other aggregate's %v", got, []int64{ids[0], ids[4], ids[9]})
	}
}

// TestClaimableReadsARunOnce: a claim of long runs costs a few buffers a
// message, not a probe of every older message of the run per message.
func TestClaimableReadsARunOnce(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	backlog(t, db, tid, 5000, 16)
	ids, blocks := claimable(t, db, 1000)
	if len(ids) != 1000 || ids[0] != 1 || ids[999] != 1000 {
		t.Fatalf("claimable = %d ids from %v, want the 1,000 oldest, 62 or 63 of each of 16 aggregates", len(ids), ids[:min(len(ids), 3)])
	}
	// Probing every older message of its run for each would read about
	// 30,000.
	if blocks > 5*1000 {
		t.Fatalf("a claim of 16 runs of about 63 touched %.0f buffers", blocks)
	}
	t.Logf("claim of 16 runs of about 63: %.0f buffers", blocks)
}

// TestClaimableCapsARun: a claim takes at most 64 messages of one
// aggregate (the relay publishes a run one message a round trip), and the
// rest of the run waits for the next claim.
func TestClaimableCapsARun(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	backlog(t, db, tid, 100, 1)
	other := insertMessages(t, db, tid, "other")
	ids, _ := claimable(t, db, 1000)
	if len(ids) != 65 || ids[0] != 1 || ids[63] != 64 || ids[64] != other[0] {
		t.Fatalf("claimable = %d ids %v, want the run's first 64 and the other aggregate's message", len(ids), ids)
	}
}

// TestClaimTakesWhatItPickedAfterItsTurn: a message in flight when a claim
// starts, and back to pending (released unsent, or retried) while the
// claim waits for its turn, is claimed with the messages after it. The
// claim's UPDATE once took its snapshot before the wait: it saw that
// message still in flight and skipped it, and claimed the later messages
// the picking had taken with it, which were then published first.
func TestClaimTakesWhatItPickedAfterItsTurn(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	ctx := context.Background()
	ids := insertMessages(t, db, tid, "a", "a")
	if _, err := db.Admin.Exec(ctx, `UPDATE outbox_messages SET state = 'processing', attempts = 1, reserved_by = 'other', reserved_at = now()
		WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	turn, err := db.System.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer turn.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := turn.Exec(ctx, "SELECT pg_advisory_xact_lock(727279, 0)"); err != nil {
		t.Fatal(err)
	}
	sink := &refuseOnceSink{next: outbox.NoSink{}}
	r := newRelay(t, db, outbox.RelayConfig{Sink: sink})
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := r.RunOnce(ctx)
		done <- result{n, err}
	}()
	testwait.For(t, "the claim to wait for its turn", func() bool {
		var waiting bool
		if err := db.Admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'
			  AND query LIKE '%name: OutboxClaim %')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	// The other relay releases its message unsent while the claim waits.
	if _, err := db.Admin.Exec(ctx, `UPDATE outbox_messages SET state = 'pending', attempts = 0, reserved_by = NULL, reserved_at = NULL
		WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := turn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.n != 2 {
		t.Fatalf("claim took %d (%v), want both messages of the aggregate", res.n, res.err)
	}
	if want := [][]int64{{ids[0]}, {ids[1]}}; fmt.Sprint(sink.calls) != fmt.Sprint(want) {
		t.Fatalf("published %v, want the released message first %v", sink.calls, want)
	}
}
