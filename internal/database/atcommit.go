package database

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AtCommit returns a Querier whose Exec does not run the statement at once
// but queues it on tx, to be sent in the same round trip as tx's COMMIT
// (one pipeline: the queued statements, then COMMIT). A write that nothing
// in the transaction reads back, such as an audit event appended after the
// change it describes, then costs no round trip of its own: on two shared
// cores each round trip is a context switch on both sides, a large part
// of a short transaction's cost.
//
// Semantics do not change: any statement tx runs later first sends what is
// queued (so it sees the queued writes, in order), and an error of a
// queued statement fails Commit, which then rolls the transaction back.
// Exec reports an empty command tag. Query and QueryRow run at once.
//
// Only transactions InTx, InTenantTx and InTenantUserTx open on a pool
// can queue; for any other tx (a nested one, or one on a bare connection)
// AtCommit returns tx itself and Exec runs at once.
func AtCommit(tx pgx.Tx) Querier {
	if t, ok := tx.(*commitTx); ok {
		return atCommit{t}
	}
	return tx
}

type atCommit struct{ *commitTx }

func (a atCommit) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if a.done {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	a.queued = append(a.queued, queuedStmt{sql, args})
	return pgconn.CommandTag{}, nil
}

type queuedStmt struct {
	sql  string
	args []any
}

// connAcquirer is a pool: the transaction helpers take a connection of
// their own from it (instead of pool.Begin) so that the transaction can
// end with a pipeline that pgx's own Tx.Commit cannot send.
type connAcquirer interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
}

// beginOnPool opens a transaction on a connection acquired from p; the
// connection goes back to the pool when the transaction ends.
func beginOnPool(ctx context.Context, p connAcquirer, opts pgx.TxOptions) (pgx.Tx, error) {
	c, err := p.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := c.BeginTx(ctx, opts)
	if err != nil {
		c.Release()
		return nil, err
	}
	return &commitTx{Tx: tx, conn: c}, nil
}

// commitTx is a pgx.Tx on a pooled connection that it owns, with
// statements queued by AtCommit.
type commitTx struct {
	pgx.Tx
	conn   *pgxpool.Conn
	queued []queuedStmt
	done   bool
}

// flush sends the queued statements before a statement that may depend on
// them.
func (t *commitTx) flush(ctx context.Context) error {
	if len(t.queued) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, q := range t.queued {
		b.Queue(q.sql, q.args...)
	}
	t.queued = nil
	return t.Tx.SendBatch(ctx, b).Close()
}

func (t *commitTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.flush(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.Tx.Exec(ctx, sql, args...)
}

func (t *commitTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Query(ctx, sql, args...)
}

func (t *commitTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.flush(ctx); err != nil {
		return errRow{err}
	}
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t *commitTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := t.flush(ctx); err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return t.Tx.SendBatch(ctx, b)
}

func (t *commitTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.flush(ctx); err != nil {
		return 0, err
	}
	return t.Tx.CopyFrom(ctx, table, cols, src)
}

func (t *commitTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Begin(ctx)
}

func (t *commitTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Prepare(ctx, name, sql)
}

// Commit sends the queued statements and COMMIT in one round trip.
func (t *commitTx) Commit(ctx context.Context) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	if len(t.queued) == 0 {
		err := t.Tx.Commit(ctx)
		t.end()
		return err
	}
	b := &pgx.Batch{}
	for _, q := range t.queued {
		b.Queue(q.sql, q.args...)
	}
	t.queued = nil
	b.Queue("COMMIT")
	br := t.Tx.Conn().SendBatch(ctx, b)
	var err error
	for range b.Len() - 1 {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback
	}
	if err != nil && t.Tx.Conn().PgConn().TxStatus() != 'I' {
		// A queued statement failed, so COMMIT never ran: end the
		// transaction here, or the pool would have to drop the connection.
		if rerr := t.Tx.Rollback(context.WithoutCancel(ctx)); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
			err = fmt.Errorf("%w (and rollback: %v)", err, rerr)
		}
	}
	t.end()
	return err
}

// Rollback drops what is queued and rolls back. After Commit it returns
// pgx.ErrTxClosed, as pgx's Tx does.
func (t *commitTx) Rollback(ctx context.Context) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	t.queued = nil
	err := t.Tx.Rollback(ctx)
	t.end()
	return err
}

// end returns the connection to the pool (which drops it, should the
// transaction still be open).
func (t *commitTx) end() {
	t.done = true
	t.conn.Release()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
