package database

import (
	"context"
	"fmt"
	"strconv"

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
// connection goes back to the pool when the transaction ends. Nothing is
// sent yet: BEGIN and prelude (the statement that scopes the transaction,
// if any) go out in one pipeline with the transaction's first statement,
// which saves every transaction a round trip of its own. The snapshot of
// a transaction is taken at its first statement either way, so nothing
// the transaction sees changes; a transaction that sends nothing never
// begins.
func beginOnPool(ctx context.Context, p connAcquirer, prelude ...queuedStmt) (pgx.Tx, error) {
	c, err := p.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &commitTx{conn: c, pgConn: c.Conn(), unsent: append([]queuedStmt{{sql: "BEGIN"}}, prelude...)}, nil
}

// commitTx is a pgx.Tx on a pooled connection that it owns: its BEGIN
// rides with its first statement, and statements queued by AtCommit ride
// with the next one or with COMMIT.
type commitTx struct {
	conn   *pgxpool.Conn
	pgConn *pgx.Conn    // conn's, kept for Conn after conn is released
	unsent []queuedStmt // the statements that open the transaction, until sent
	begun  bool         // BEGIN was sent
	queued []queuedStmt
	done   bool
	// savepoints numbers the nested transactions (Begin).
	savepoints int
}

// ahead is a batch of what must reach the server before the caller's next
// statement (the transaction's opening statements, then the queued ones),
// or nil when nothing must.
func (t *commitTx) ahead() *pgx.Batch {
	if len(t.unsent) == 0 && len(t.queued) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, q := range append(t.unsent, t.queued...) {
		b.Queue(q.sql, q.args...)
	}
	t.unsent, t.queued, t.begun = nil, nil, true
	return b
}

// send sends b, which holds ahead statements first, and reads their
// results: the results left are those of what the caller added after
// them. On an error the batch is closed and the error returned.
func (t *commitTx) send(ctx context.Context, b *pgx.Batch, ahead int) (pgx.BatchResults, error) {
	br := t.conn.SendBatch(ctx, b)
	for range ahead {
		if _, err := br.Exec(); err != nil {
			br.Close() //nolint:errcheck // the statement's error is the one to report
			return nil, err
		}
	}
	return br, nil
}

// flush sends what must go first on its own: before a statement that
// cannot join a pipeline (a batch of the caller's, COPY, PREPARE).
func (t *commitTx) flush(ctx context.Context) error {
	b := t.ahead()
	if b == nil {
		return nil
	}
	br, err := t.send(ctx, b, b.Len())
	if err != nil {
		return err
	}
	return br.Close()
}

// pipelined reports whether a statement with args can join a pipeline: a
// batch runs every statement in the connection's mode, so one that asks
// for another mode or format (pgx takes that from its first argument) is
// sent alone.
func pipelined(args []any) bool {
	if len(args) == 0 {
		return true
	}
	switch args[0].(type) {
	case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID, pgx.QueryRewriter:
		return false
	}
	return true
}

// behind sends the statement in one pipeline after what must go first and
// returns the pipeline's results at the statement's. nil: the statement is
// the caller's to send on its own, as nothing had to go first, or it went
// ahead alone because the statement cannot join a pipeline.
func (t *commitTx) behind(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	if t.done {
		return nil, pgx.ErrTxClosed
	}
	if !pipelined(args) {
		return nil, t.flush(ctx)
	}
	b := t.ahead()
	if b == nil {
		return nil, nil
	}
	n := b.Len()
	b.Queue(sql, args...)
	return t.send(ctx, b, n)
}

func (t *commitTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := t.behind(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	if br == nil {
		return t.conn.Exec(ctx, sql, args...)
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (t *commitTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := t.behind(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	if br == nil {
		return t.conn.Query(ctx, sql, args...)
	}
	rows, err := br.Query()
	if err != nil {
		br.Close() //nolint:errcheck // the statement's error is the one to report
		return nil, err
	}
	return &pipelineRows{Rows: rows, done: br.Close}, nil
}

func (t *commitTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return firstRow{rows}
}

func (t *commitTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.done {
		return pgx.FailedBatchResults(b, pgx.ErrTxClosed)
	}
	if err := t.flush(ctx); err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return t.conn.SendBatch(ctx, b)
}

func (t *commitTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if t.done {
		return 0, pgx.ErrTxClosed
	}
	if err := t.flush(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, cols, src)
}

// Begin opens a savepoint, as pgx's Tx does.
func (t *commitTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.done {
		return nil, pgx.ErrTxClosed
	}
	t.savepoints++
	sp := &savepoint{commitTx: t, name: "sp_" + strconv.Itoa(t.savepoints)}
	if _, err := t.Exec(ctx, "SAVEPOINT "+sp.name); err != nil {
		return nil, err
	}
	return sp, nil
}

// savepoint is a transaction nested in a commitTx: it runs its statements
// on the outer transaction, after what that one queued.
type savepoint struct {
	*commitTx
	name   string
	closed bool
}

func (s *savepoint) Commit(ctx context.Context) error { return s.end(ctx, "RELEASE SAVEPOINT ") }

func (s *savepoint) Rollback(ctx context.Context) error { return s.end(ctx, "ROLLBACK TO SAVEPOINT ") }

// end releases or rolls back to the savepoint, once.
func (s *savepoint) end(ctx context.Context, stmt string) error {
	if s.closed {
		return pgx.ErrTxClosed
	}
	s.closed = true
	_, err := s.commitTx.Exec(ctx, stmt+s.name)
	return err
}

func (t *commitTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if t.done {
		return nil, pgx.ErrTxClosed
	}
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.pgConn.Prepare(ctx, name, sql)
}

// LargeObjects is not supported (Jejak stores none): pgx builds them over
// its own transactions only.
func (t *commitTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *commitTx) Conn() *pgx.Conn { return t.pgConn }

// Commit sends what is queued and COMMIT in one round trip (with BEGIN
// too when the transaction sent nothing else: a transaction of queued
// statements only). A transaction that never began has nothing to commit.
func (t *commitTx) Commit(ctx context.Context) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	defer t.end()
	if len(t.queued) == 0 && !t.begun {
		return nil
	}
	b := t.ahead()
	if b == nil {
		b = &pgx.Batch{}
	}
	n := b.Len()
	b.Queue("COMMIT")
	br, err := t.send(ctx, b, n)
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback
	}
	if err != nil && t.pgConn.PgConn().TxStatus() != 'I' {
		// A queued statement failed, so COMMIT never ran: end the
		// transaction here, or the pool would have to drop the connection.
		if _, rerr := t.conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			err = fmt.Errorf("%w (and rollback: %v)", err, rerr)
		}
	}
	return err
}

// Rollback drops what is queued and rolls back. After Commit it returns
// pgx.ErrTxClosed, as pgx's Tx does.
func (t *commitTx) Rollback(ctx context.Context) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	defer t.end()
	t.queued = nil
	if !t.begun {
		return nil
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK")
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
