package audit_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
)

// TestConcurrentAppendsFormOneChain: 16 writers × 200 appends on one
// tenant give seq 1..3200 with no gap and no fork, and the chain verifies.
func TestConcurrentAppendsFormOneChain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	const writers, each = 16, 200
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
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var n, minSeq, maxSeq, distinctPrev int64
	err := f.db.Admin.QueryRow(ctx, `SELECT count(*), min(seq), max(seq), count(DISTINCT prev_hash)
		FROM audit_events WHERE tenant_id = $1`, tn).Scan(&n, &minSeq, &maxSeq, &distinctPrev)
	if err != nil {
		t.Fatal(err)
	}
	if n != writers*each || minSeq != 1 || maxSeq != writers*each || distinctPrev != n {
		t.Fatalf("chain: %d rows, seq %d..%d, %d distinct prev hashes; want %d gap-free, no fork",
			n, minSeq, maxSeq, distinctPrev, writers*each)
	}
	res, err := audit.Verify(ctx, f.db.App, tn)
	if err != nil || !res.OK || res.CheckedThrough != writers*each {
		t.Fatalf("verify: %+v, %v", res, err)
	}
}

// TestTenantsDoNotWaitOnEachOther: while one transaction holds tenant A's
// head, tenant B appends freely and a second tenant-A writer waits.
func TestTenantsDoNotWaitOnEachOther(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a, b := f.tenant(t, "melati"), f.tenant(t, "senja")
	f.recordN(t, a, 1)
	f.recordN(t, b, 1)
	ev := func(tn int64) audit.Event {
		return audit.Event{TenantID: tn, ActorKind: audit.ActorSystem, Action: "test.append", Entity: "e", EntityID: "1"}
	}

	holder, err := f.db.App.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx) //nolint:errcheck
	if _, err := holder.Exec(ctx, "SELECT set_config('app.tenant_id', $1, true)", fmt.Sprint(a)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.rec.Record(ctx, holder, ev(a)); err != nil {
		t.Fatal(err)
	}

	// Tenant B is not blocked (a deadline turns a wait into a failure).
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var rb audit.Recorded
	err = database.InTenantTx(bctx, f.db.App, b, func(tx pgx.Tx) (err error) {
		rb, err = f.rec.Record(bctx, tx, ev(b))
		return err
	})
	if err != nil || rb.Seq != 2 {
		t.Fatalf("tenant B append while A's head is held: seq %d, %v", rb.Seq, err)
	}

	// A second writer of tenant A waits for the holder.
	done := make(chan audit.Recorded, 1)
	go func() {
		var r audit.Recorded
		err := database.InTenantTx(ctx, f.db.App, a, func(tx pgx.Tx) (err error) {
			r, err = f.rec.Record(ctx, tx, ev(a))
			return err
		})
		if err != nil {
			t.Errorf("second writer of A: %v", err)
		}
		done <- r
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var waiting int
		if err := f.db.Admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 1 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("second writer of A finished (seq %d) while A's head was held", r.Seq)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("second writer of A never waited on the head lock")
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for work
	}
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.Seq != 3 {
		t.Fatalf("second writer of A got seq %d, want 3", r.Seq)
	}
}

// TestVerifyDetectsTampering: superuser edits, deletions and reorderings
// are each reported at the first broken sequence number.
func TestVerifyDetectsTampering(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()

	// tamper runs SQL as the superuser with the append-only triggers off.
	tamper := func(t *testing.T, sql string, args ...any) {
		t.Helper()
		err := database.InTx(ctx, f.db.Admin, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "ALTER TABLE audit_events DISABLE TRIGGER USER"); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, sql, args...); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "ALTER TABLE audit_events ENABLE TRIGGER USER")
			return err
		})
		if err != nil {
			t.Fatalf("tamper: %v", err)
		}
	}
	cases := []struct {
		name    string
		sql     string
		wantSeq int64
		reason  string
	}{
		{"edited action", `UPDATE audit_events SET action = 'project.rename' WHERE tenant_id = $1 AND seq = 7`, 7, "altered"},
		{"edited detail", `UPDATE audit_events SET detail = '{"i": 99}' WHERE tenant_id = $1 AND seq = 3`, 3, "altered"},
		{"edited time", `UPDATE audit_events SET occurred_at = occurred_at + interval '1 microsecond' WHERE tenant_id = $1 AND seq = 9`, 9, "altered"},
		{"null actor made a user", `UPDATE audit_events SET actor_kind = 'staff', actor_id = (SELECT min(id) FROM users) WHERE tenant_id = $1 AND seq = 4`, 4, "altered"},
		{"deleted middle row", `DELETE FROM audit_events WHERE tenant_id = $1 AND seq = 5`, 5, "missing"},
		{"deleted tail", `DELETE FROM audit_events WHERE tenant_id = $1 AND seq >= 9`, 9, "missing"},
		{"swapped rows", `UPDATE audit_events SET seq = CASE seq WHEN 5 THEN 6 ELSE 5 END + 1000 WHERE tenant_id = $1 AND seq IN (5, 6);
			UPDATE audit_events SET seq = seq - 1000 WHERE tenant_id = $1 AND seq > 1000`, 5, "does not link"},
		{"row appended past the head", `INSERT INTO audit_events (tenant_id, seq, actor_kind, action, entity, entity_id, occurred_at, prev_hash, hash)
			SELECT tenant_id, 11, actor_kind, action, entity, entity_id, occurred_at, hash, hash FROM audit_events WHERE tenant_id = $1 AND seq = 10`, 11, ""},
	}
	f.user(t, "staff@jejak.test", 0)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tn := f.tenant(t, fmt.Sprintf("tenant-%d", i))
			f.recordN(t, tn, 10)
			if res, err := audit.Verify(ctx, f.db.System, tn); err != nil || !res.OK || res.CheckedThrough != 10 {
				t.Fatalf("before tampering: %+v %v", res, err)
			}
			if strings.Contains(c.sql, ";") {
				for _, stmt := range strings.Split(c.sql, ";") {
					tamper(t, stmt, tn)
				}
			} else {
				tamper(t, c.sql, tn)
			}
			res, err := audit.Verify(ctx, f.db.System, tn)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK || res.FirstBadSeq != c.wantSeq || !strings.Contains(res.Reason, c.reason) || res.CheckedThrough != c.wantSeq-1 {
				t.Fatalf("verify after %s = %+v, want first bad seq %d (%q)", c.name, res, c.wantSeq, c.reason)
			}
		})
	}
}
