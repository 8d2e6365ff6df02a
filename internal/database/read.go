package database

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ReadTenant runs fn with a Querier scoped to tenantID exactly as
// InTenantTx scopes a transaction (the tenant, and the signed-in viewer of
// ctx), for reads. Each statement fn sends travels in one round trip with
// the scoping, in a transaction of its own: the extended protocol's
// implicit one, which runs from the first statement to the pipeline's
// Sync. InTenantTx costs BEGIN, the statement and COMMIT, three round
// trips for one read. Under READ COMMITTED each statement of a
// transaction takes its own snapshot, so statements that only read give
// nothing up by not sharing one; anything that writes, or must see one
// snapshot, belongs in InTenantTx.
//
// It pays for reads of one statement, or two. Each transaction costs
// PostgreSQL more than a statement inside one: the owner's home (four
// statements) was served 15-30 % slower this way than by InTenantTx, and
// the trail (one) 20 % faster (docs/benchmarks.md).
//
// On anything but a pool (a transaction, a connection) fn runs in
// InTenantTx.
func ReadTenant(ctx context.Context, db Beginner, tenantID int64, fn func(Querier) error) error {
	if tenantID <= 0 {
		return errors.New("tenant read: tenant id must be positive")
	}
	p, ok := db.(connAcquirer)
	if !ok {
		return InTenantTx(ctx, db, tenantID, func(tx pgx.Tx) error { return fn(tx) })
	}
	conn, err := p.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("tenant read: acquire connection: %w", err)
	}
	defer conn.Release()
	user := ""
	if id := viewerID(ctx); id > 0 {
		user = strconv.FormatInt(id, 10)
	}
	return fn(scopedReader{conn: conn, tenant: strconv.FormatInt(tenantID, 10), user: user})
}

// The scoping statements of ReadTenant: parameters, not literals, so one
// prepared statement per connection serves every tenant. The second also
// plans the statement after it for its actual parameters, as an unnamed
// statement would be (FreshPlans), although the batch sends it prepared.
const (
	readScope      = "SELECT set_config('app.tenant_id', $1, true), set_config('app.user_id', $2, true)"
	readScopeFresh = "SELECT set_config('app.tenant_id', $1, true), set_config('app.user_id', $2, true), " +
		"set_config('plan_cache_mode', 'force_custom_plan', true)"
)

type scopedReader struct {
	conn         *pgxpool.Conn
	tenant, user string
}

// send sends the scoping and the statement in one pipeline and returns
// the results, the scoping's already read.
func (r scopedReader) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	scope := readScope
	if len(args) > 0 {
		if mode, ok := args[0].(pgx.QueryExecMode); ok {
			// A batch runs every statement in the connection's mode;
			// FreshPlans' is the one other mode asked for here.
			if mode != pgx.QueryExecModeExec {
				return nil, fmt.Errorf("tenant read: query mode %v is not supported", mode)
			}
			scope, args = readScopeFresh, args[1:]
		}
	}
	b := &pgx.Batch{}
	b.Queue(scope, r.tenant, r.user)
	b.Queue(sql, args...)
	br := r.conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	return br, nil
}

func (r scopedReader) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := r.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (r scopedReader) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := r.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		if rows != nil {
			rows.Close()
		}
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (r scopedReader) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := r.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return firstRow{rows}
}

// batchRows are the rows of a pipeline's last statement: closing them
// reads the rest of the pipeline, so the connection is ready for the next.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	// The rows are done: finish the pipeline now, so Err reports its
	// failure before the caller's deferred Close.
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// firstRow is QueryRow's pgx.Row on rows that may hold none.
type firstRow struct{ rows pgx.Rows }

func (r firstRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
