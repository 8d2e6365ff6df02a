package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/queries"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestStatsWritersDoNotWaitForEachOther: two relay loops (two backends)
// adding to the same minute's delivered count at the same moment do not
// take turns on one row: the second adds while the first is still open,
// and the console reads the minute's total.
func TestStatsWritersDoNotWaitForEachOther(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	minute := time.Date(2026, 12, 4, 9, 30, 0, 0, time.UTC)
	at := minute.Add(17 * time.Second)

	// Two connections of backends that write different rollup rows, as
	// most pairs do (one in 16 share a row, and then they do wait).
	var held []*pgxpool.Conn
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	var a, b *pgxpool.Conn
	for a == nil || b == nil {
		if len(held) == int(db.System.Config().MaxConns) {
			t.Fatalf("no two backends on different rollup rows among %d connections", len(held))
		}
		c, err := db.System.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if a == nil {
			a = c
			continue
		}
		if c.Conn().PgConn().PID()%16 != a.Conn().PgConn().PID()%16 {
			b = c
		}
	}

	first, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback(ctx) //nolint:errcheck
	if err := queries.New(first).OutboxStatsAdd(ctx, queries.OutboxStatsAddParams{Now: &at, Delivered: 3}); err != nil {
		t.Fatal(err)
	}
	second, err := b.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Rollback(ctx) //nolint:errcheck
	// A row lock wait would end in an error here rather than a hang.
	if _, err := second.Exec(ctx, "SET LOCAL lock_timeout = '5s'"); err != nil {
		t.Fatal(err)
	}
	if err := queries.New(second).OutboxStatsAdd(ctx, queries.OutboxStatsAddParams{Now: &at, Delivered: 4, Failed: 1}); err != nil {
		t.Fatalf("second writer of the minute, the first still open: %v", err)
	}
	for _, tx := range []interface{ Commit(context.Context) error }{second, first} {
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := queries.New(db.System).OutboxConsoleStatsSince(ctx, minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || !rows[0].Minute.Equal(minute) || rows[0].Delivered != 7 || rows[0].Failed != 1 {
		t.Fatalf("console minutes %+v, want one minute %v with 7 delivered, 1 failed", rows, minute)
	}
}
