package points_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/points"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// blockCustomer holds customer's balance row locked in an open transaction
// until the returned function runs: an award to that customer waits at
// its balance update, and with it its batch.
func blockCustomer(t *testing.T, db *testdb.DB, tenant int64, customer string) (release func()) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Admin.Exec(ctx, `INSERT INTO points_balances (tenant_id, customer, balance, updated_at) VALUES ($1, $2, 0, now())`,
		tenant, customer); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM points_balances WHERE tenant_id = $1 AND customer = $2 FOR UPDATE`, tenant, customer); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback(ctx) }
}

// batchInProgress starts an award of tenant (job 1, msg-first, to a
// customer whose balance row blockCustomer holds) and returns once it
// waits on that row: the tenant's next awards then queue for the batch
// after it. The award's result goes to first; release lets it go on.
func batchInProgress(t *testing.T, db *testdb.DB, h *points.Handler, tenant int64, first chan<- error) (release func()) {
	t.Helper()
	release = blockCustomer(t, db, tenant, "c-blocked")
	go func() {
		first <- h.Handle(context.Background(), awardJob(1, tenant, award(tenant, "msg-first", "c-blocked", 1)))
	}()
	testwait.For(t, "the first award to wait on the lock", func() bool {
		return count(t, db, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`) == 1
	})
	return release
}

// noteCommitModes makes every statement that writes ledger rows note the
// synchronous_commit setting of its transaction in commit_modes.
func noteCommitModes(t *testing.T, db *testdb.DB) {
	t.Helper()
	for _, q := range []string{
		`CREATE TABLE commit_modes (mode text NOT NULL)`,
		`GRANT INSERT ON commit_modes TO jejak_app`,
		`CREATE FUNCTION note_commit_mode() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN INSERT INTO commit_modes VALUES (current_setting('synchronous_commit')); RETURN NULL; END $$`,
		`CREATE TRIGGER note_commit_mode AFTER INSERT ON points_ledger FOR EACH STATEMENT EXECUTE FUNCTION note_commit_mode()`,
	} {
		if _, err := db.Admin.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func count(t *testing.T, db *testdb.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Admin.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestAwardsOfOneTenantGoTogether: while one award of a tenant is being
// written, the tenant's next awards wait and are then written in one
// transaction (their ledger rows share one xmin), each exactly once, with
// one outbox message and one audit event (naming its own job) per message
// applied. A message id given twice and one processed before are not
// applied again. Another tenant's award does not wait for the batch.
func TestAwardsOfOneTenantGoTogether(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenant(t, db, "acme")
	other := newTenant(t, db, "other")
	h := newHandler(db)
	noteCommitModes(t, db)
	if err := h.Handle(ctx, awardJob(100, tenant, award(tenant, "msg-old", "c-1", 7))); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 20)
	release := batchInProgress(t, db, h, tenant, errs)
	// Ten awards (one of them twice, one a redelivery of msg-old).
	batch := []map[string]any{award(tenant, "msg-old", "c-1", 7), award(tenant, "msg-dup", "c-2", 5), award(tenant, "msg-dup", "c-2", 5)}
	for i := range 7 {
		batch = append(batch, award(tenant, fmt.Sprintf("msg-%d", i), fmt.Sprintf("c-%d", i%3), int64(10+i)))
	}
	for i, p := range batch {
		go func() { errs <- h.Handle(ctx, awardJob(int64(10+i), tenant, p)) }()
	}
	testwait.For(t, "ten awards waiting", func() bool { return h.Waiting(tenant) == len(batch) })
	// Another tenant is not behind acme's batch.
	if err := h.Handle(ctx, awardJob(50, other, award(other, "msg-x", "c-1", 3))); err != nil {
		t.Fatalf("other tenant: %v", err)
	}
	release()
	for range len(batch) + 1 {
		if err := <-errs; err != nil {
			t.Fatalf("award: %v", err)
		}
	}
	// msg-old before, msg-first, msg-dup and msg-0..6 now.
	if n := count(t, db, `SELECT count(*) FROM points_ledger WHERE tenant_id = $1`, tenant); n != 10 {
		t.Fatalf("ledger rows %d, want 10 (one per message)", n)
	}
	if n := count(t, db, `SELECT count(DISTINCT xmin::text) FROM points_ledger WHERE tenant_id = $1 AND message_id NOT IN ('msg-old', 'msg-first')`, tenant); n != 1 {
		t.Fatalf("the eight waiting awards were written by %d transactions, want 1", n)
	}
	// Alone or together, the awards commit asynchronously (the jobs'
	// completion flushes them).
	if n := count(t, db, `SELECT count(*) FROM commit_modes WHERE mode <> 'off'`); n != 0 ||
		count(t, db, `SELECT count(*) FROM commit_modes`) < 3 {
		t.Fatalf("%d award transactions committed synchronously", n)
	}
	want := map[string]int{"c-0": 10 + 13 + 16, "c-1": 7 + 11 + 14, "c-2": 5 + 12 + 15, "c-blocked": 1}
	for c, w := range want {
		if got := balance(t, db, tenant, c); got != int64(w) {
			t.Errorf("balance of %s = %d, want %d", c, got, w)
		}
	}
	// Each names the user its job was requested by, alone or batched.
	if n := count(t, db, `SELECT count(*) FROM outbox_messages WHERE tenant_id = $1 AND event_type = 'points.awarded'
		AND requested_by = $2`, tenant, awardRequester); n != 10 {
		t.Errorf("outbox messages requested by the jobs' user %d, want 10", n)
	}
	// One event per applied message, naming the job that applied it: one
	// of msg-dup's two jobs (11 and 12 arrive in either order), never
	// msg-old's redelivery (10).
	rows, err := db.Admin.Query(ctx, `SELECT job_id FROM audit_events WHERE tenant_id = $1 AND action = 'points.awarded' ORDER BY job_id`, tenant)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(jobs); got != "[1 11 13 14 15 16 17 18 19 100]" && got != "[1 12 13 14 15 16 17 18 19 100]" {
		t.Errorf("audited jobs %v, want [1 11|12 13 14 15 16 17 18 19 100]", jobs)
	}
}

// TestFailedBatchFallsBackToOneByOne: when a batch's transaction fails,
// its awards are written one by one, so only the award that cannot be
// written fails its job, and nothing of it is left behind: whether the
// batch fails at its first statement (a ledger row) or at its COMMIT (a
// balance, sent with it).
func TestFailedBatchFallsBackToOneByOne(t *testing.T) {
	t.Parallel()
	for _, table := range []string{"points_ledger", "points_balances"} {
		t.Run(table, func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t)
			ctx := context.Background()
			tenant := newTenant(t, db, "acme")
			h := newHandler(db)
			// A rule the database enforces and Award.Validate does not know.
			if _, err := db.Admin.Exec(ctx, `ALTER TABLE `+table+` ADD CONSTRAINT no_boom CHECK (customer <> 'boom')`); err != nil {
				t.Fatal(err)
			}
			errs := make(chan error, 10)
			release := batchInProgress(t, db, h, tenant, errs)
			results := map[string]chan error{}
			for i, c := range []string{"ok-1", "boom", "ok-2"} {
				ch := make(chan error, 1)
				results[c] = ch
				go func() { ch <- h.Handle(ctx, awardJob(int64(2+i), tenant, award(tenant, "msg-"+c, c, 5))) }()
			}
			testwait.For(t, "three awards waiting", func() bool { return h.Waiting(tenant) == 3 })
			release()
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
			for c, ch := range results {
				err := <-ch
				if (err != nil) != (c == "boom") {
					t.Errorf("award to %s: err %v", c, err)
				}
			}
			for c, want := range map[string]int64{"ok-1": 5, "ok-2": 5, "boom": 0} {
				if got := balance(t, db, tenant, c); got != want {
					t.Errorf("balance of %s = %d, want %d", c, got, want)
				}
			}
			if n := count(t, db, `SELECT count(*) FROM processed_messages WHERE tenant_id = $1 AND message_id = 'msg-boom'`, tenant); n != 0 {
				t.Errorf("the failed award left its dedup claim behind: a retry would skip it")
			}
			if n := count(t, db, `SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'points.awarded'`, tenant); n != 3 {
				t.Errorf("audit events %d, want 3 (msg-first, ok-1, ok-2)", n)
			}
		})
	}
}

// TestGivenUpAwardLeavesTheQueue: an award waiting for its tenant's batch
// whose job is given up (its context ends) returns at once with the
// context's error and leaves the queue, its award unwritten; the awards
// behind it are written when the batch ends, and its retry applies it.
func TestGivenUpAwardLeavesTheQueue(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenant(t, db, "acme")
	h := newHandler(db)
	first := make(chan error, 1)
	release := batchInProgress(t, db, h, tenant, first)
	defer release()
	gctx, giveUp := context.WithCancel(ctx)
	givenUp := make(chan error, 1)
	go func() { givenUp <- h.Handle(gctx, awardJob(2, tenant, award(tenant, "msg-given-up", "c-1", 5))) }()
	testwait.For(t, "the award to wait for the batch", func() bool { return h.Waiting(tenant) == 1 })
	behind := make(chan error, 1)
	go func() { behind <- h.Handle(ctx, awardJob(3, tenant, award(tenant, "msg-behind", "c-2", 7))) }()
	testwait.For(t, "two awards waiting", func() bool { return h.Waiting(tenant) == 2 })

	giveUp()
	select {
	case err := <-givenUp:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("given-up award: %v, want context.Canceled", err)
		}
	case <-time.After(testwait.Default):
		t.Fatal("the given-up award still waits for the batch in progress")
	}
	if n := h.Waiting(tenant); n != 1 {
		t.Fatalf("%d awards waiting after one left, want 1", n)
	}

	release()
	for name, ch := range map[string]chan error{"first": first, "behind": behind} {
		if err := <-ch; err != nil {
			t.Fatalf("%s award: %v", name, err)
		}
	}
	if got := balance(t, db, tenant, "c-1"); got != 0 {
		t.Fatalf("the given-up award was written (balance %d)", got)
	}
	if got := balance(t, db, tenant, "c-2"); got != 7 {
		t.Fatalf("balance of c-2 = %d, want 7", got)
	}
	if err := h.Handle(ctx, awardJob(2, tenant, award(tenant, "msg-given-up", "c-1", 5))); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got := balance(t, db, tenant, "c-1"); got != 5 {
		t.Fatalf("balance of c-1 after the retry = %d, want 5", got)
	}
}

// TestBatchLocksSharedRowsOnlyInItsCommit: of a batch's statements, those
// that lock rows other batches of the tenant also lock (the customers'
// balances, their outbox turn) go in the pipeline that commits, so another
// replica's batch waits for a commit, not for a round trip of this one;
// the claims and ledger rows go in the first. The balances add up, a
// message id given twice or processed before counting once.
func TestBatchLocksSharedRowsOnlyInItsCommit(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenant(t, db, "acme")
	svc := points.NewService(clock.NewFrozen(t0))
	log := &testdb.StatementLog{}
	pool := log.Pool(t, db.App)
	awardIn := func(awards ...points.Award) []int {
		t.Helper()
		var applied []int
		if err := database.InTenantTx(ctx, pool, tenant, func(tx pgx.Tx) error {
			var err error
			applied, err = svc.AwardMany(ctx, tx, tenant, awards)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return applied
	}
	awardIn(points.Award{MessageID: "msg-old", Customer: "c-1", Points: 7})
	log.Take("")
	applied := awardIn(
		points.Award{MessageID: "msg-old", Customer: "c-1", Points: 7},
		points.Award{MessageID: "msg-a", Customer: "c-1", Points: 2},
		points.Award{MessageID: "msg-b", Customer: "c-2", Points: 3},
		points.Award{MessageID: "msg-a", Customer: "c-1", Points: 2},
		points.Award{MessageID: "msg-c", Customer: "c-1", Points: 4},
	)
	if !slices.Equal(applied, []int{1, 2, 4}) {
		t.Fatalf("applied %v, want [1 2 4]", applied)
	}
	stmts, trips := log.TakeTrips(`name: PointsClaimMany|name: PointsBalanceAddMany|name: OutboxInsertMany|^COMMIT$`)
	got := map[string]int{}
	for i, s := range stmts {
		got[strings.Fields(strings.TrimPrefix(s, "-- name: "))[0]] = trips[i]
	}
	commit := got["COMMIT"]
	if commit == 0 || got["PointsClaimMany"] == 0 || got["PointsClaimMany"] == commit ||
		got["PointsBalanceAddMany"] != commit || got["OutboxInsertMany"] != commit {
		t.Fatalf("round trips of the batch's statements %v: want the claims before, the balances and outbox messages with COMMIT", got)
	}
	for c, want := range map[string]int64{"c-1": 7 + 2 + 4, "c-2": 3} {
		if b := balance(t, db, tenant, c); b != want {
			t.Errorf("balance of %s = %d, want %d", c, b, want)
		}
	}
	if n := count(t, db, `SELECT count(*) FROM outbox_messages WHERE tenant_id = $1 AND event_type = 'points.awarded'`, tenant); n != 4 {
		t.Errorf("outbox messages %d, want 4 (msg-old once, msg-a, msg-b, msg-c)", n)
	}
}
