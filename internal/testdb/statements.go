package testdb

import (
	"context"
	"regexp"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// StatementLog is a pgx query and batch tracer that records the
// statements a pool sends, one by one or in pipelines (set it as the
// pool's ConnConfig.Tracer), for tests that count them.
type StatementLog struct {
	mu    sync.Mutex
	stmts []string
	trips []int // the round trip each of stmts went in, numbered from 1
	trip  int
	batch map[*pgx.Conn]int // the round trip of each connection's pipeline being sent
}

func (l *StatementLog) add(sql string, trip int) {
	l.stmts = append(l.stmts, sql)
	l.trips = append(l.trips, trip)
}

func (l *StatementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	l.trip++
	l.add(d.SQL, l.trip)
	l.mu.Unlock()
	return ctx
}

func (l *StatementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *StatementLog) TraceBatchStart(ctx context.Context, c *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	l.mu.Lock()
	l.trip++
	if l.batch == nil {
		l.batch = map[*pgx.Conn]int{}
	}
	l.batch[c] = l.trip
	l.mu.Unlock()
	return ctx
}

func (l *StatementLog) TraceBatchQuery(_ context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.mu.Lock()
	l.add(d.SQL, l.batch[c])
	l.mu.Unlock()
}

func (l *StatementLog) TraceBatchEnd(_ context.Context, c *pgx.Conn, _ pgx.TraceBatchEndData) {
	l.mu.Lock()
	delete(l.batch, c)
	l.mu.Unlock()
}

// Pool opens a pool configured like p whose statements l records, closed
// when t ends.
func (l *StatementLog) Pool(t testing.TB, p *pgxpool.Pool) *pgxpool.Pool {
	t.Helper()
	cfg := p.Config()
	cfg.ConnConfig.Tracer = l
	traced, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("testdb: open a traced pool: %v", err)
	}
	t.Cleanup(traced.Close)
	return traced
}

// Take returns the statements sent since the last Take that match pattern
// (a regular expression; "" matches every one).
func (l *StatementLog) Take(pattern string) []string {
	out, _ := l.TakeTrips(pattern)
	return out
}

// TakeTrips is Take with the round trip each statement went in: the
// statements of one pipeline share one.
func (l *StatementLog) TakeTrips(pattern string) (stmts []string, trips []int) {
	re := regexp.MustCompile(pattern)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range l.stmts {
		if re.MatchString(s) {
			stmts = append(stmts, s)
			trips = append(trips, l.trips[i])
		}
	}
	l.stmts, l.trips = nil, nil
	return stmts, trips
}
