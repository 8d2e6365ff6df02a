package database_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

// tripTracer counts round trips: each single statement is one, and a
// batch (one pipeline) is one however many statements it carries.
type tripTracer struct{ trips atomic.Int64 }

func (c *tripTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.trips.Add(1)
	return ctx
}
func (c *tripTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *tripTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.trips.Add(1)
	return ctx
}
func (c *tripTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *tripTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// tripPool is a pool of at most maxConns connections to a fresh test
// database, connected, whose round trips the tracer counts.
func tripPool(t *testing.T, maxConns int32) (*pgxpool.Pool, *tripTracer) {
	t.Helper()
	db := testdb.New(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	tr := &tripTracer{}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	return pool, tr
}

func atCommitPool(t *testing.T) (*pgxpool.Pool, *tripTracer) {
	t.Helper()
	pool, tr := tripPool(t, 2)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE notes (id int PRIMARY KEY, body text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	// Prepare the statements once, so the counted runs below are steady
	// state (a statement's first use on a connection adds a Parse).
	for range 2 {
		err := database.InTx(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", -1, "warm"); err != nil {
				return err
			}
			_, err := database.AtCommit(tx).Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", -2, "warm")
			if err != nil {
				return err
			}
			return errors.New("roll back")
		})
		if err == nil {
			t.Fatal("warm-up should roll back")
		}
	}
	return pool, tr
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM notes").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAtCommitRidesWithCommit: a queued statement is not sent until
// COMMIT, and then goes in COMMIT's round trip; BEGIN goes with the first
// statement: the pipeline of BEGIN and the change, and that of the queued
// insert and COMMIT, make two round trips.
func TestAtCommitRidesWithCommit(t *testing.T) {
	t.Parallel()
	pool, tr := atCommitPool(t)
	ctx := context.Background()
	before := tr.trips.Load()
	var during int64
	err := database.InTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", 1, "change"); err != nil {
			return err
		}
		tag, err := database.AtCommit(tx).Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", 2, "its record")
		if err != nil || tag.RowsAffected() != 0 {
			t.Errorf("queued exec: tag %q, err %v", tag, err)
		}
		during = tr.trips.Load() - before
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if during != 1 {
		t.Errorf("before commit: %d round trips, want 1 (begin with the change): BEGIN went alone or the queued insert was sent early", during)
	}
	if got := tr.trips.Load() - before; got != 2 {
		t.Errorf("transaction took %d round trips, want 2", got)
	}
	var body string
	if err := pool.QueryRow(ctx, "SELECT body FROM notes WHERE id = 2").Scan(&body); err != nil || body != "its record" {
		t.Fatalf("queued row after commit: %q, %v", body, err)
	}
}

// TestAtCommitFailureRollsBackTheChange: a queued statement that fails
// fails Commit and takes the change with it, and the connection goes back
// to the pool usable.
func TestAtCommitFailureRollsBackTheChange(t *testing.T) {
	t.Parallel()
	pool, _ := atCommitPool(t)
	ctx := context.Background()
	err := database.InTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", 10, "change"); err != nil {
			return err
		}
		// NOT NULL violation, known only to the server.
		_, err := database.AtCommit(tx).Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", 11, nil)
		return err
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23502" {
		t.Fatalf("commit error %v, want the queued insert's not-null violation", err)
	}
	if n := count(t, pool); n != 0 {
		t.Fatalf("%d rows after a failed commit, want 0: the change committed without its record", n)
	}
	// Both connections still work (none left inside a failed transaction).
	for i := range 4 {
		err := database.InTx(ctx, pool, func(tx pgx.Tx) error {
			_, err := database.AtCommit(tx).Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", 20+i, "ok")
			return err
		})
		if err != nil {
			t.Fatalf("transaction %d after the failure: %v", i, err)
		}
	}
	if n := count(t, pool); n != 4 {
		t.Fatalf("%d rows, want 4", n)
	}
}

// TestAtCommitKeepsStatementOrder: a statement after a queued one sees
// its write (the queue is sent first); a rolled-back transaction sends
// nothing it queued; outside a pool transaction AtCommit runs at once.
func TestAtCommitKeepsStatementOrder(t *testing.T) {
	t.Parallel()
	pool, _ := atCommitPool(t)
	ctx := context.Background()
	err := database.InTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := database.AtCommit(tx).Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", 30, "first"); err != nil {
			return err
		}
		var body string
		if err := tx.QueryRow(ctx, "SELECT body FROM notes WHERE id = 30").Scan(&body); err != nil {
			t.Errorf("the queued write is not visible to the next statement: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = database.InTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := database.AtCommit(tx).Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", 31, "dropped"); err != nil {
			return err
		}
		return errors.New("changed my mind")
	})
	if err == nil || count(t, pool) != 1 {
		t.Fatalf("rolled-back transaction: err %v, rows %d (want 1)", err, count(t, pool))
	}
	// A bare connection's transaction cannot queue: the insert runs at once
	// and is visible inside it before any commit.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	err = database.InTx(ctx, conn, func(tx pgx.Tx) error {
		if _, err := database.AtCommit(tx).Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", 32, "at once"); err != nil {
			return err
		}
		var n int
		if err := tx.Conn().QueryRow(ctx, "SELECT count(*) FROM notes WHERE id = 32").Scan(&n); err != nil || n != 1 {
			t.Errorf("insert on a bare connection's tx was deferred: n=%d err=%v", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAsyncCommitIsTheTransactionsAlone: InTenantTxAsyncCommit scopes the
// tenant like InTenantTx and turns synchronous_commit off inside the
// transaction only; the pooled connection's next transaction commits
// synchronously again.
func TestAsyncCommitIsTheTransactionsAlone(t *testing.T) {
	t.Parallel()
	pool, _ := atCommitPool(t)
	ctx := context.Background()
	show := func(tx pgx.Tx) (sync, tenant string) {
		t.Helper()
		if err := tx.QueryRow(ctx, "SELECT current_setting('synchronous_commit'), current_setting('app.tenant_id', true)").Scan(&sync, &tenant); err != nil {
			t.Fatal(err)
		}
		return sync, tenant
	}
	for range 2 { // both of the pool's connections
		err := database.InTenantTxAsyncCommit(ctx, pool, 5, func(tx pgx.Tx) error {
			if s, tn := show(tx); s != "off" || tn != "5" {
				t.Errorf("inside: synchronous_commit %q, tenant %q; want off, 5", s, tn)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		err := database.InTenantTx(ctx, pool, 5, func(tx pgx.Tx) error {
			if s, _ := show(tx); s != "on" {
				t.Errorf("a later transaction on the pool commits with synchronous_commit %q", s)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestAtCommitStatementsWakeLocalLoops: a statement queued for the COMMIT
// asks for the local wake-up as one sent at once does: the loops
// registered for the channel are woken once the transaction commits, and
// not when it rolls back.
func TestAtCommitStatementsWakeLocalLoops(t *testing.T) {
	t.Parallel()
	pool, _ := atCommitPool(t)
	ctx := context.Background()
	woken := make(chan struct{}, 4)
	defer database.WakeLocal(pool, "jejak_outbox", func() { woken <- struct{}{} })()
	run := func(fail bool) error {
		return database.InTx(ctx, pool, func(tx pgx.Tx) error {
			q := database.AtCommit(tx)
			if _, err := q.Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", 1, "queued"); err != nil {
				return err
			}
			database.WakeAfterCommit(q, "jejak_outbox")
			if len(woken) > 0 {
				t.Error("woken before the commit")
			}
			if fail {
				return errors.New("roll back")
			}
			return nil
		})
	}
	if err := run(true); err == nil {
		t.Fatal("the failing transaction committed")
	}
	if len(woken) != 0 {
		t.Fatal("a rolled-back transaction woke the loops")
	}
	if err := run(false); err != nil {
		t.Fatal(err)
	}
	if len(woken) != 1 {
		t.Fatalf("%d wake-ups after the commit, want 1", len(woken))
	}
}

// TestFirstStatementCarriesBegin: BEGIN goes out with a transaction's first
// statement, and the transaction behaves as one begun on its own: a
// transaction that sends nothing costs no round trip; one whose first
// statement fails rolls back and leaves the pool's connections ready; one
// whose first statement asks for its own query mode sends it alone but
// still inside the transaction; a savepoint rolled back keeps what the
// transaction wrote before it; queued statements alone are committed.
func TestFirstStatementCarriesBegin(t *testing.T) {
	t.Parallel()
	pool, tr := atCommitPool(t)
	ctx := context.Background()

	before := tr.trips.Load()
	if err := database.InTx(ctx, pool, func(pgx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if n := tr.trips.Load() - before; n != 0 {
		t.Errorf("a transaction that sent nothing took %d round trips, want 0", n)
	}

	err := database.InTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", 1, nil)
		return err
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23502" {
		t.Fatalf("first statement's error = %v, want its not-null violation", err)
	}
	var status string
	if err := pool.QueryRow(ctx, "SELECT current_setting('transaction_isolation')").Scan(&status); err != nil {
		t.Fatalf("the connection after a failed first statement: %v", err)
	}

	err = database.InTx(ctx, pool, func(tx pgx.Tx) error {
		var first, last time.Time
		if err := tx.QueryRow(ctx, "SELECT now()", pgx.QueryExecModeExec).Scan(&first); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", 2, "kept"); err != nil {
			return err
		}
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := sp.Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", 3, "undone"); err != nil {
			return err
		}
		if err := sp.Rollback(ctx); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT now()").Scan(&last); err != nil {
			return err
		}
		if !first.Equal(last) {
			t.Errorf("now() %v, then %v: the first statement ran outside the transaction", first, last)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Queued statements alone: BEGIN goes with them and COMMIT.
	if err := database.InTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := database.AtCommit(tx).Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", 4, "queued alone")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, "SELECT id FROM notes ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || !slices.Equal(ids, []int32{2, 4}) {
		t.Fatalf("notes: %v (%v), want [2 4] (3 was rolled back to its savepoint)", ids, err)
	}
}
