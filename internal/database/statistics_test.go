package database_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestRefreshStatisticsFollowsAutovacuumsRule: a table changed past
// autovacuum's threshold since its last ANALYZE is analyzed (its row count
// and change counter say so); a table below it, or one just analyzed, is
// left alone, and one analyzed less than a naptime ago waits unless it has
// more than doubled; the tenant-facing role may not call it.
func TestRefreshStatisticsFollowsAutovacuumsRule(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	conn := freshStatistics(t, db)
	// 500 tenants: past 50 + 10 % of the few the template holds.
	if _, err := conn.Exec(ctx, `INSERT INTO tenants (slug, name)
		SELECT 'stats-' || i, 'Stats ' || i FROM generate_series(1, 500) i`); err != nil {
		t.Fatal(err)
	}
	// Three rows: far below the threshold of 50.
	if _, err := conn.Exec(ctx, `INSERT INTO wake_listeners (channel, listener, asleep, expires_at)
		SELECT 'jejak_jobs', 'l' || i, false, now() + interval '1 minute' FROM generate_series(1, 3) i`); err != nil {
		t.Fatal(err)
	}
	// Counts reach shared memory when the session next goes idle.
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}

	tables, err := database.RefreshStatistics(ctx, db.System, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tables, "tenants") || slices.Contains(tables, "wake_listeners") {
		t.Fatalf("analyzed %v, want tenants and not wake_listeners", tables)
	}
	var reltuples float64
	var analyzed bool
	if err := db.Admin.QueryRow(ctx, `SELECT c.reltuples, s.last_analyze IS NOT NULL
		FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.relname = 'tenants'`).Scan(&reltuples, &analyzed); err != nil {
		t.Fatal(err)
	}
	if reltuples < 500 || !analyzed {
		t.Fatalf("tenants: reltuples %v, analyzed %v; want at least 500 rows counted by an ANALYZE", reltuples, analyzed)
	}
	if again, err := database.RefreshStatistics(ctx, db.System, 0); err != nil || slices.Contains(again, "tenants") {
		t.Fatalf("second pass analyzed %v (%v): tenants was just analyzed", again, err)
	}

	// Churn past the threshold, the row count unchanged: stale by the rule,
	// but analyzed less than a naptime ago, so it waits.
	if _, err := conn.Exec(ctx, `UPDATE tenants SET name = name || '.' WHERE slug LIKE 'stats-%'`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	if again, err := database.RefreshStatistics(ctx, db.System, 0); err != nil || slices.Contains(again, "tenants") {
		t.Fatalf("after churn analyzed %v (%v): tenants was analyzed less than a naptime ago and kept its size", again, err)
	}
	// Grown past twice the rows its statistics counted: analyzed at once.
	if _, err := conn.Exec(ctx, `INSERT INTO tenants (slug, name)
		SELECT 'grown-' || i, 'Grown ' || i FROM generate_series(1, 1200) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	if again, err := database.RefreshStatistics(ctx, db.System, 0); err != nil || !slices.Contains(again, "tenants") {
		t.Fatalf("after growth analyzed %v (%v): tenants holds more than twice its counted rows", again, err)
	}

	if _, err := database.RefreshStatistics(ctx, db.App, 0); err == nil {
		t.Fatal("the tenant-facing role refreshed statistics; only the system role may")
	}
}

// freshStatistics refreshes the statistics of whatever the migrations and
// the template left stale (a pass takes at most eight tables; nothing
// holds one, so none stays), and returns an owner's connection, released
// at the test's end, to make tables stale with.
func freshStatistics(t *testing.T, db *testdb.DB) *pgxpool.Conn {
	t.Helper()
	ctx := context.Background()
	for pass := 0; ; pass++ {
		tables, err := database.RefreshStatistics(ctx, db.System, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(tables) == 0 {
			break
		}
		if pass == 20 {
			t.Fatalf("still stale after %d passes: %v", pass, tables)
		}
	}
	conn, err := db.Admin.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return conn
}

// countingQuerier counts the statements sent through it.
type countingQuerier struct {
	database.Querier
	n int
}

func (c *countingQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c.n++
	return c.Querier.QueryRow(ctx, sql, args...)
}

// TestRefreshStatisticsAnalyzesEachTableInAStatementOfItsOwn: a statement
// holds its snapshot (and the cluster's xmin horizon) until it ends, so
// two stale tables are analyzed by two statements, not one holding the
// horizon through both.
func TestRefreshStatisticsAnalyzesEachTableInAStatementOfItsOwn(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	conn := freshStatistics(t, db)
	for _, q := range []string{
		`INSERT INTO tenants (slug, name) SELECT 'each-' || i, 'Each ' || i FROM generate_series(1, 500) i`,
		`INSERT INTO wake_listeners (channel, listener, asleep, expires_at)
		   SELECT 'jejak_jobs', 'each-' || i, false, now() + interval '1 minute' FROM generate_series(1, 500) i`,
		"SELECT pg_stat_force_next_flush()",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	q := &countingQuerier{Querier: db.System}
	tables, err := database.RefreshStatistics(ctx, q, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tables, "tenants") || !slices.Contains(tables, "wake_listeners") {
		t.Fatalf("analyzed %v, want tenants and wake_listeners", tables)
	}
	if q.n < len(tables) {
		t.Fatalf("%d tables analyzed by %d statements, want one statement each", len(tables), q.n)
	}
}
