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
}

func (l *StatementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	l.stmts = append(l.stmts, d.SQL)
	l.mu.Unlock()
	return ctx
}

func (l *StatementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *StatementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (l *StatementLog) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.mu.Lock()
	l.stmts = append(l.stmts, d.SQL)
	l.mu.Unlock()
}

func (l *StatementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

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
	re := regexp.MustCompile(pattern)
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.stmts {
		if re.MatchString(s) {
			out = append(out, s)
		}
	}
	l.stmts = nil
	return out
}
