package database

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier runs statements: a pool, a connection or a transaction (it is the
// shape sqlc's generated code needs).
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Pool is a connection pool as the services hold it: it runs single
// statements and begins transactions.
type Pool interface {
	Beginner
	Querier
}

// FreshPlans wraps db so every query is sent as an unnamed statement and
// planned with its actual parameters. Filtered reads written as
// "(narg IS NULL OR col = narg)" need it: a cached generic plan cannot drop
// the unused filters and may walk the wrong index, while a plan for the
// actual values uses the index that fits the filters present.
func FreshPlans(db Querier) Querier { return freshPlans{db} }

type freshPlans struct{ Querier }

func (f freshPlans) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return f.Querier.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}

func (f freshPlans) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return f.Querier.QueryRow(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}

// TxBeginner starts transactions with options (isolation level, read-only);
// pools and connections are TxBeginners.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// SnapshotPool is a Pool that also begins transactions with options, for
// services that read a consistent snapshot (repeatable read, read-only).
type SnapshotPool interface {
	Pool
	TxBeginner
}
