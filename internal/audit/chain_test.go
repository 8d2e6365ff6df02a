package audit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// TestConcurrentAppendsFormOneLog: 16 writers × 200 appends on one tenant,
// sealed by two sealers racing each other while the writers write, give
// leaves 1..3200 with no gap, each event sealed exactly once, and the log
// verifies.
func TestConcurrentAppendsFormOneLog(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	const writers, each = 16, 200
	other := audit.NewSealer(f.db.System, audit.SealerOptions{Signer: f.signer, Batch: 37})
	stop := make(chan struct{})
	var sealers sync.WaitGroup
	sealErrs := make(chan error, 2)
	for _, s := range []*audit.Sealer{f.sealer, other} {
		sealers.Add(1)
		go func() {
			defer sealers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.SealOnce(ctx, false); err != nil {
					sealErrs <- err
					return
				}
			}
		}()
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				err := database.InTenantTx(ctx, f.db.App, tn, func(tx pgx.Tx) error {
					// Durability is not under test; skip the flush wait.
					if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
						return err
					}
					_, err := f.rec.Record(ctx, tx, audit.Event{TenantID: tn, ActorKind: audit.ActorSystem,
						Action: "test.append", Entity: "writer", EntityID: fmt.Sprint(w)})
					return err
				})
				if err != nil {
					errs <- fmt.Errorf("writer %d append %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	sealers.Wait()
	close(errs)
	close(sealErrs)
	for err := range errs {
		t.Fatal(err)
	}
	for err := range sealErrs {
		t.Fatalf("sealer: %v", err)
	}
	f.seal(t)
	var n, minSeq, maxSeq, distinctEvents, events int64
	err := f.db.Admin.QueryRow(ctx, `SELECT count(*), min(seq), max(seq), count(DISTINCT event_id),
		(SELECT count(*) FROM audit_events WHERE tenant_id = $1)
		FROM audit_leaves WHERE tenant_id = $1`, tn).Scan(&n, &minSeq, &maxSeq, &distinctEvents, &events)
	if err != nil {
		t.Fatal(err)
	}
	if n != writers*each || minSeq != 1 || maxSeq != writers*each || distinctEvents != n || events != n {
		t.Fatalf("log: %d leaves, seq %d..%d, %d distinct events of %d; want %d gap-free, each once",
			n, minSeq, maxSeq, distinctEvents, events, writers*each)
	}
	if res := f.verify(t, tn); !res.OK || res.CheckedThrough != writers*each || res.TreeSize != writers*each {
		t.Fatalf("verify: %+v", res)
	}
}

// TestWritersNeverWait: while a transaction of tenant A has recorded an
// event and stays open, another writer of A and a writer of B record and
// commit at once; the sealer seals what committed, and the open event,
// whose id is lower, is sealed once it commits (nothing is skipped).
func TestWritersNeverWait(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a, b := f.tenant(t, "melati"), f.tenant(t, "senja")
	ev := func(tn int64, id string) audit.Event {
		return audit.Event{TenantID: tn, ActorKind: audit.ActorSystem, Action: "test.append", Entity: "e", EntityID: id}
	}
	holder, err := f.db.App.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx) //nolint:errcheck
	if err := database.ScopeTx(ctx, holder, a); err != nil {
		t.Fatal(err)
	}
	held, err := f.rec.Record(ctx, holder, ev(a, "held"))
	if err != nil {
		t.Fatal(err)
	}
	if held.Seq != 0 || held.Sealed() {
		t.Fatalf("a just-recorded event is sealed: %+v", held)
	}

	// A deadline turns any wait into a failure.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, tn := range []int64{a, b} {
		err := database.InTenantTx(wctx, f.db.App, tn, func(tx pgx.Tx) error {
			_, err := f.rec.Record(wctx, tx, ev(tn, "free"))
			return err
		})
		if err != nil {
			t.Fatalf("writer of tenant %d while A has an open writer: %v", tn, err)
		}
	}
	f.seal(t)
	leaves := func(tn int64) []string {
		rows, err := f.db.Admin.Query(ctx, `SELECT e.entity_id FROM audit_leaves l JOIN audit_events e
			ON e.tenant_id = l.tenant_id AND e.id = l.event_id WHERE l.tenant_id = $1 ORDER BY l.seq`, tn)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if got := strings.Join(leaves(a), ","); got != "free" {
		t.Fatalf("tenant A's leaves with one writer still open = %q, want the committed event only", got)
	}
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	f.seal(t)
	if got := strings.Join(leaves(a), ","); got != "free,held" {
		t.Fatalf("tenant A's leaves after the late commit = %q, want free,held", got)
	}
	for _, tn := range []int64{a, b} {
		if res := f.verify(t, tn); !res.OK {
			t.Fatalf("verify tenant %d: %+v", tn, res)
		}
	}
}

// heldTree makes a tenant with a sealed tree of three events and two
// more waiting, and locks the tree's row as a sealer busy with it would, in
// the transaction it returns (rolled back when t ends).
func (f *fixture) heldTree(t *testing.T) (int64, pgx.Tx) {
	t.Helper()
	tn := f.tenant(t, "melati")
	f.recordN(t, tn, 3)
	f.seal(t) // creates the tree row
	f.recordN(t, tn, 2)
	return tn, f.holdTree(t, tn)
}

// holdTree locks tenant tn's tree row in a transaction of its own, as
// another sealer sealing it does, until the test rolls it back.
func (f *fixture) holdTree(t *testing.T, tn int64) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	busy, err := f.db.System.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Rollback(context.Background()) }) //nolint:errcheck // rolled back by the test already
	if _, err := busy.Exec(ctx, `SELECT 1 FROM audit_trees WHERE tenant_id = $1 FOR UPDATE`, tn); err != nil {
		t.Fatal(err)
	}
	return busy
}

// TestSealerSkipsATreeAnotherSealerHolds: a tenant whose tree row another
// sealer has locked is skipped without waiting, and sealed once free. The
// other sealer may also have grown the tree in its open transaction, as
// one integrating a batch has: the row then has a version no transaction
// can see committed yet, and an insert of the row (the first seal of a
// tenant creates it) waits for that transaction's end even when it would
// insert nothing, so a held tree must be told from a missing one without
// one.
func TestSealerSkipsATreeAnotherSealerHolds(t *testing.T) {
	t.Parallel()
	for _, grown := range []bool{false, true} {
		t.Run(fmt.Sprintf("grown=%v", grown), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			tn, busy := f.heldTree(t)
			if grown {
				if _, err := busy.Exec(ctx, `UPDATE audit_trees SET root = root WHERE tenant_id = $1`, tn); err != nil {
					t.Fatal(err)
				}
			}
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			res, err := f.sealer.SealOnce(sctx, true)
			if err != nil || res.Sealed != 0 || res.Held != 1 {
				t.Fatalf("seal while another sealer holds the tree: %+v, %v", res, err)
			}
			if err := busy.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if res, err := f.sealer.SealOnce(ctx, true); err != nil || res.Sealed != 2 || res.Signed != 1 {
				t.Fatalf("seal once the tree is free: %+v, %v", res, err)
			}
		})
	}
}

// TestOneTenantsSlowSealHoldsNoOtherBack: a pass seals tenants side by
// side, so the other tenants' events are sealed while one tenant's batch
// waits (here for a lock on its day count; on a loaded database, for its
// round trips and its commit). One at a time, a pass over ten busy tenants
// took seconds, and every tenant's events waited that long.
func TestOneTenantsSlowSealHoldsNoOtherBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	slow := f.tenant(t, "lambat") // the lowest id: a pass takes it first
	others := []int64{f.tenant(t, "cepat"), f.tenant(t, "kilat"), f.tenant(t, "gesit")}
	f.recordN(t, slow, 1)
	f.seal(t) // the slow tenant's day count exists
	busy, err := f.db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Rollback(context.Background()) }) //nolint:errcheck // rolled back by the test already
	if _, err := busy.Exec(ctx, `SELECT 1 FROM audit_day_counts WHERE tenant_id = $1 FOR UPDATE`, slow); err != nil {
		t.Fatal(err)
	}
	f.recordN(t, slow, 2)
	for _, o := range others {
		f.recordN(t, o, 2)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.sealer.SealOnce(ctx, true)
		done <- err
	}()
	testwait.For(t, "the other tenants' events to be sealed while one tenant's seal waits", func() bool {
		for _, o := range others {
			if f.unsealed(t, o) > 0 {
				return false
			}
		}
		return true
	})
	if n := f.unsealed(t, slow); n != 2 {
		t.Fatalf("%d of the slow tenant's events unsealed while its seal waits, want 2", n)
	}
	if err := busy.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("seal: %v", err)
	}
	if n := f.unsealed(t, slow); n != 0 {
		t.Fatalf("%d of the slow tenant's events unsealed after the pass", n)
	}
	for _, tn := range append(others, slow) {
		if r := f.verify(t, tn); !r.OK {
			t.Fatalf("tenant %d: %+v", tn, r)
		}
	}
}

// TestDrainWaitsForATreeAnotherSealerHolds: Drain does not return while
// a tenant's events wait behind another sealer's lock on its tree (a
// replica's sealer, or a cancelled one whose transaction has not ended):
// it looks again until the tree is free and then seals them.
func TestDrainWaitsForATreeAnotherSealerHolds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn, busy := f.heldTree(t)
	// The draining sealer's tree locks are counted on a traced pool.
	log := &testdb.StatementLog{}
	pool := log.Pool(t, f.db.System)
	drainer := audit.NewSealer(pool, audit.SealerOptions{Signer: f.signer})
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- drainer.Drain(dctx) }()
	locks := 0
	testwait.For(t, "Drain to find the tree held twice", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Drain returned (%v) while the tree was held, with %d events unsealed", err, f.unsealed(t, tn))
		default:
		}
		locks += len(log.Take(`name: AuditTreeLock `))
		return locks >= 2
	})
	if n := f.unsealed(t, tn); n != 2 {
		t.Fatalf("%d events unsealed while the tree is held, want 2", n)
	}
	if err := busy.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("drain: %v", err)
	}
	if n := f.unsealed(t, tn); n != 0 {
		t.Fatalf("%d events unsealed after Drain", n)
	}
}

// TestVerifyNamesTheFirstBadSeq: each way of rewriting history, done as a
// superuser with the triggers off, is reported at the first bad seq. The
// log is sealed in three rounds (checkpoints at 2, 5 and 10 events).
func TestVerifyNamesTheFirstBadSeq(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	other := newSigner(t)
	forged, err := other.Sign(audit.Origin("x"), 10, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	leafEvent := func(seq int) string {
		return fmt.Sprintf(`(SELECT event_id FROM audit_leaves WHERE tenant_id = $1 AND seq = %d)`, seq)
	}
	cases := []struct {
		name    string
		sql     []string
		anchors func(tn int64) []audit.AnchorPoint
		wantSeq int64
		reason  string
	}{
		{name: "edited action", sql: []string{`UPDATE audit_sealed SET action = 'project.rename' WHERE tenant_id = $1 AND id = ` + leafEvent(7)}, wantSeq: 7, reason: "altered"},
		{name: "edited detail", sql: []string{`UPDATE audit_sealed SET detail = '{"i": 99}' WHERE tenant_id = $1 AND id = ` + leafEvent(3)}, wantSeq: 3, reason: "altered"},
		{name: "deleted event", sql: []string{`DELETE FROM audit_sealed WHERE tenant_id = $1 AND id = ` + leafEvent(5)}, wantSeq: 5, reason: "deleted"},
		{name: "swapped events", sql: []string{`UPDATE audit_leaves SET event_id = CASE seq WHEN 5 THEN ` + leafEvent(6) + ` ELSE ` + leafEvent(5) + ` END + 1000000 WHERE tenant_id = $1 AND seq IN (5, 6)`,
			`UPDATE audit_leaves SET event_id = event_id - 1000000 WHERE tenant_id = $1 AND seq IN (5, 6)`}, wantSeq: 5, reason: "swapped"},
		{name: "truncated tail", sql: []string{`DELETE FROM audit_leaves WHERE tenant_id = $1 AND seq >= 9`}, wantSeq: 9, reason: "missing"},
		{name: "altered tree hash", sql: []string{`UPDATE audit_leaves SET hashes = overlay(hashes placing sha256('x') from 33) WHERE tenant_id = $1 AND seq = 4`}, wantSeq: 4, reason: "tree hashes"},
		{name: "tree rewound, checkpoints kept", sql: []string{`DELETE FROM audit_leaves WHERE tenant_id = $1 AND seq > 5`,
			`UPDATE audit_trees SET size = 5, signed_size = 5, root = (SELECT root FROM audit_checkpoints WHERE tenant_id = $1 AND size = 5) WHERE tenant_id = $1`},
			wantSeq: 6, reason: "rewound"},
		{name: "tree rewound, checkpoints too; the anchor remembers", sql: []string{`DELETE FROM audit_leaves WHERE tenant_id = $1 AND seq > 5`,
			`DELETE FROM audit_checkpoints WHERE tenant_id = $1 AND size > 5`,
			`UPDATE audit_trees SET size = 5, signed_size = 5, root = (SELECT root FROM audit_checkpoints WHERE tenant_id = $1 AND size = 5) WHERE tenant_id = $1`},
			anchors: func(tn int64) []audit.AnchorPoint { return []audit.AnchorPoint{{Size: 10, Root: make([]byte, 32)}} },
			wantSeq: 6, reason: "rewound"},
		{name: "forged checkpoint", sql: []string{`UPDATE audit_checkpoints SET note = $2 WHERE tenant_id = $1 AND size = 10`}, wantSeq: 6, reason: "checkpoint of size 10"},
		{name: "event put among the sealed by hand", sql: []string{`INSERT INTO audit_sealed (tenant_id, id, actor_kind, action, entity, entity_id, occurred_at)
			VALUES ($1, nextval('audit_events_id_seq'), 'system', 'project.create', 'project', '1', now())`}, wantSeq: 11, reason: "no leaf"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tn := f.tenant(t, fmt.Sprintf("tenant-%d", i))
			for _, n := range []int{2, 3, 5} {
				f.recordN(t, tn, n)
				f.seal(t)
			}
			if res := f.verify(t, tn); !res.OK || res.CheckedThrough != 10 {
				t.Fatalf("before tampering: %+v", res)
			}
			for _, stmt := range c.sql {
				if strings.Contains(stmt, "$2") {
					f.tamper(t, stmt, tn, forged)
				} else {
					f.tamper(t, stmt, tn)
				}
			}
			var anchors []audit.AnchorPoint
			if c.anchors != nil {
				anchors = c.anchors(tn)
			}
			res, err := audit.VerifyWith(ctx, f.db.System, tn, audit.VerifyOptions{VerifierKey: f.vkey, Anchors: anchors})
			if err != nil {
				t.Fatal(err)
			}
			if res.OK || res.FirstBadSeq != c.wantSeq || !strings.Contains(res.Reason, c.reason) {
				t.Fatalf("verify after %s = %+v, want first bad seq %d (%q)", c.name, res, c.wantSeq, c.reason)
			}
		})
	}
}

// TestVerifyCatchesAReSignedRewrite: an operator with the signing key
// rewrites event 3 and re-seals the log from there; the new tree is signed
// and self-consistent, but the checkpoint of 5 events signed before no
// longer matches: verification names seq 3, the first leaf after the last
// checkpoint that still holds (size 2).
func TestVerifyCatchesAReSignedRewrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tn := f.tenant(t, "melati")
	for _, n := range []int{2, 3, 5} {
		f.recordN(t, tn, n)
		f.seal(t)
	}
	third := `(SELECT event_id FROM audit_leaves WHERE tenant_id = $1 AND seq = 3)`
	f.tamper(t, `UPDATE audit_sealed SET detail = '{"i": 300}' WHERE tenant_id = $1 AND id = `+third, tn)
	// Events 3 to 10 back in the queue, out of the sealed table.
	f.tamper(t, `WITH back AS (DELETE FROM audit_sealed s USING audit_leaves l
		    WHERE s.tenant_id = $1 AND l.tenant_id = $1 AND l.event_id = s.id AND l.seq > 2 RETURNING s.*)
		INSERT INTO audit_unsealed (tenant_id, event_id, actor_kind, actor_id, action, entity, entity_id, detail, occurred_at, trace_id, job_id)
		SELECT tenant_id, id, actor_kind, actor_id, action, entity, entity_id, detail, occurred_at, trace_id, job_id FROM back`, tn)
	f.tamper(t, `DELETE FROM audit_leaves WHERE tenant_id = $1 AND seq > 2`, tn)
	f.tamper(t, `DELETE FROM audit_checkpoints WHERE tenant_id = $1 AND size = 10`, tn)
	f.tamper(t, `UPDATE audit_trees SET size = 2, signed_size = 2, signed_at = 'epoch',
		root = (SELECT root FROM audit_checkpoints WHERE tenant_id = $1 AND size = 2) WHERE tenant_id = $1`, tn)
	f.seal(t) // re-signs a tree of 10 with the real key
	res := f.verify(t, tn)
	if res.OK || res.FirstBadSeq != 3 || !strings.Contains(res.Reason, "checkpoint of size 5") {
		t.Fatalf("verify after a re-signed rewrite = %+v, want first bad seq 3 against the checkpoint of size 5", res)
	}
}

// TestAPassSignsAGrownTreeWithoutNewEvents: a tree grown within SignEvery
// of its last checkpoint is sealed unsigned; a later pass with nothing to
// seal signs it (forced here), and one after that has nothing to do.
func TestAPassSignsAGrownTreeWithoutNewEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	sealer := audit.NewSealer(f.db.System, audit.SealerOptions{Signer: f.signer, SignEvery: time.Hour})
	pass := func(force bool, sealed, signed int) {
		t.Helper()
		res, err := sealer.SealOnce(ctx, force)
		if err != nil || res.Sealed != sealed || res.Signed != signed {
			t.Fatalf("pass (force %v): %+v, %v; want %d sealed, %d signed", force, res, err, sealed, signed)
		}
	}
	signedSize := func() (checkpoint, tree int64) {
		t.Helper()
		if err := f.db.Admin.QueryRow(ctx, `SELECT (SELECT max(size) FROM audit_checkpoints WHERE tenant_id = $1),
			(SELECT signed_size FROM audit_trees WHERE tenant_id = $1)`, tn).Scan(&checkpoint, &tree); err != nil {
			t.Fatal(err)
		}
		return checkpoint, tree
	}
	f.recordN(t, tn, 2)
	pass(false, 2, 1)
	f.recordN(t, tn, 1)
	pass(false, 1, 0)
	if cp, tree := signedSize(); cp != 2 || tree != 2 {
		t.Fatalf("after sealing within SignEvery: checkpoint %d, tree signed at %d; want 2 and 2", cp, tree)
	}
	pass(true, 0, 1)
	if cp, tree := signedSize(); cp != 3 || tree != 3 {
		t.Fatalf("after the signing pass: checkpoint %d, tree signed at %d; want 3 and 3", cp, tree)
	}
	pass(true, 0, 0)
	if r := f.verify(t, tn); !r.OK {
		t.Fatalf("verify: %+v", r)
	}
}

// TestASealBatchIsAFewRoundTrips: whatever the tree's size, a batch reads
// the tree's stored hashes it needs (its right edge) in the statement that
// reads the batch, and writes in one statement sent with the COMMIT, so a
// pass over one tenant is four round trips.
func TestASealBatchIsAFewRoundTrips(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	log := &testdb.StatementLog{}
	sealer := audit.NewSealer(log.Pool(t, f.db.System), audit.SealerOptions{Signer: f.signer, Batch: 3})
	// Batches of 1, 3, 3, 2, 3 and 1 events over trees of sizes 0 to 12:
	// edges of one to three subtrees.
	for i, n := range []int{1, 3, 3, 2, 3, 1} {
		f.recordN(t, tn, n)
		log.Take("")
		if res, err := sealer.SealOnce(ctx, true); err != nil || res.Sealed != n || res.Signed != 1 {
			t.Fatalf("pass %d: %+v, %v; want %d sealed and signed", i, res, err, n)
		}
		stmts, trips := log.TakeTrips("")
		hashReads, writes := 0, 0
		for _, s := range stmts {
			hashReads += strings.Count(s, "name: AuditLeafHashes ")
			writes += strings.Count(s, "name: AuditSealBatch ")
		}
		if hashReads != 0 || writes != 1 {
			t.Errorf("pass %d: %d reads of stored hashes of their own (want 0) and %d writes (want 1)", i, hashReads, writes)
		}
		// The list of tenants; BEGIN with the tree's lock; the batch with
		// the tree's edge; the write with COMMIT. (The first pass also
		// creates the tree.)
		if n := len(slices.Compact(trips)); i > 0 && n != 4 {
			t.Errorf("pass %d: %d round trips, want 4: %q", i, n, stmts)
		}
	}
	// A tree another sealer holds costs a pass the list, BEGIN with the
	// lock it does not get, and ROLLBACK.
	f.recordN(t, tn, 1)
	busy := f.holdTree(t, tn)
	log.Take("")
	if res, err := sealer.SealOnce(ctx, true); err != nil || res.Held != 1 || res.Sealed != 0 {
		t.Fatalf("pass over a held tree: %+v, %v", res, err)
	}
	if stmts, trips := log.TakeTrips(""); len(slices.Compact(trips)) != 3 {
		t.Errorf("pass over a held tree: %d round trips, want 3: %q", len(slices.Compact(trips)), stmts)
	}
	if err := busy.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sealer.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if r := f.verify(t, tn); !r.OK {
		t.Fatalf("verify: %+v", r)
	}
}

// TestAPassSealsATenantAgainWhileAnotherIsSlow: a tenant sealed while
// another of the pass is still in its first batch is sealed again at once
// while it has events, not after the slow one and the next pass's list.
// Here the slow tenant's batch waits for its day-count row, which the test
// holds: the fast tenant's six events go in batches of two within the one
// pass, which returns once the slow tenant's batch is written.
func TestAPassSealsATenantAgainWhileAnotherIsSlow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	slow, fast := f.tenant(t, "lambat"), f.tenant(t, "cepat")
	sealer := audit.NewSealer(f.db.System, audit.SealerOptions{Signer: f.signer, Batch: 2, Parallel: 2})
	f.recordN(t, slow, 1)
	if err := sealer.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	hold, err := f.db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx) //nolint:errcheck // committed below unless the test failed
	if _, err := hold.Exec(ctx, `SELECT 1 FROM audit_day_counts WHERE tenant_id = $1 FOR UPDATE`, slow); err != nil {
		t.Fatal(err)
	}
	f.recordN(t, slow, 1)
	f.recordN(t, fast, 6)
	type result struct {
		res audit.SealResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := sealer.SealOnce(ctx, false)
		done <- result{res, err}
	}()
	queued := func(tn int64) (n int) {
		if err := f.db.Admin.QueryRow(ctx, `SELECT count(*) FROM audit_unsealed WHERE tenant_id = $1`, tn).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testwait.For(t, "the fast tenant's six events sealed in the slow tenant's pass", func() bool { return queued(fast) == 0 })
	select {
	case r := <-done:
		t.Fatalf("the pass ended (%+v, %v) while the slow tenant's batch waited", r.res, r.err)
	default:
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.res.Sealed != 7 || r.res.Held != 0 {
		t.Fatalf("pass: %+v, %v; want 7 events sealed (6 + 1), none held", r.res, r.err)
	}
	for _, tn := range []int64{slow, fast} {
		if n := queued(tn); n != 0 {
			t.Errorf("tenant %d: %d events still queued", tn, n)
		}
	}
	if err := sealer.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []int64{slow, fast} {
		if v := f.verify(t, tn); !v.OK {
			t.Fatalf("verify tenant %d: %+v", tn, v)
		}
	}
}

// TestSealersStartingAtOnceAgreeOnOneKey: sealers with different keys
// checking their key at the same moment, on a database nothing was signed
// in yet, do not both go on: one claims the log key and every other is
// told ErrForeignKey; a sealer with the claimed key passes.
func TestSealersStartingAtOnceAgreeOnOneKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const n = 4
	sealers := make([]*audit.Sealer, n)
	for i := range sealers {
		sealers[i] = audit.NewSealer(f.db.System, audit.SealerOptions{Signer: newSigner(t)})
	}
	start := make(chan struct{})
	errs := make(chan error, n)
	for _, s := range sealers {
		go func() {
			<-start
			errs <- s.CheckKey(ctx)
		}()
	}
	close(start)
	passed := 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			passed++
		case !errors.Is(err, audit.ErrForeignKey):
			t.Errorf("CheckKey: %v, want nil or ErrForeignKey", err)
		}
	}
	if passed != 1 {
		t.Fatalf("%d of %d sealers with different keys passed the check, want exactly 1", passed, n)
	}
	var claimed string
	if err := f.db.Admin.QueryRow(ctx, "SELECT verifier_key FROM audit_log_key").Scan(&claimed); err != nil {
		t.Fatal(err)
	}
	again := 0
	for _, s := range sealers {
		if s.VerifierKey() == claimed {
			if err := s.CheckKey(ctx); err != nil {
				t.Errorf("the claimed key's sealer, again: %v", err)
			}
			again++
		}
	}
	if again != 1 {
		t.Errorf("%d sealers hold the claimed key %s, want 1", again, claimed)
	}
}
