package database

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

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
	return fn(rowsQuerier(scopedReader{conn: conn, scopeArgs: newScopeArgs(ctx, tenantID)}.query))
}

// scopeArgs are the parameters of readScope: tenantID and the signed-in
// viewer of ctx ("" for none).
type scopeArgs struct{ tenant, user string }

func newScopeArgs(ctx context.Context, tenantID int64) scopeArgs {
	return scopeArgsOf(tenantID, viewerID(ctx))
}

// scopeArgsOf are the parameters of readScope for tenantID and user id
// userID (0: none).
func scopeArgsOf(tenantID, userID int64) scopeArgs {
	return scopeArgs{tenant: strconv.FormatInt(tenantID, 10), user: userArg(userID)}
}

// The statements that lead a read's pipeline. The scoping takes
// parameters, not literals, so one prepared statement per connection
// serves every tenant. The fresh ones also plan the statements after them
// for their actual parameters, as an unnamed statement would be
// (FreshPlans), although the batch sends them prepared; readFresh alone
// leads an unscoped pipeline (ReadAll).
const (
	readScope      = "SELECT set_config('app.tenant_id', $1, true), set_config('app.user_id', $2, true)"
	readScopeFresh = "SELECT set_config('app.tenant_id', $1, true), set_config('app.user_id', $2, true), " +
		"set_config('plan_cache_mode', 'force_custom_plan', true)"
	readFresh = "SELECT set_config('plan_cache_mode', 'force_custom_plan', true)"
)

// planMode takes a leading query mode off a statement's arguments and
// reports whether it asks for fresh plans. A batch runs every statement in
// the connection's mode; FreshPlans' is the one other mode asked for here.
func planMode(args []any) (rest []any, fresh bool, err error) {
	if len(args) == 0 {
		return args, false, nil
	}
	mode, ok := args[0].(pgx.QueryExecMode)
	if !ok {
		return args, false, nil
	}
	if mode != pgx.QueryExecModeExec {
		return nil, false, fmt.Errorf("tenant read: query mode %v is not supported", mode)
	}
	return args[1:], true, nil
}

type scopedReader struct {
	conn *pgxpool.Conn
	scopeArgs
}

// query sends the scoping and the statement in one pipeline.
func (r scopedReader) query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	args, fresh, err := planMode(args)
	if err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	queueLead(b, &r.scopeArgs, fresh)
	b.Queue(sql, args...)
	br := r.conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
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
	return &pipelineRows{Rows: rows, done: br.Close}, nil
}

// queueLead queues the statement that leads a read's pipeline, if any:
// the scoping (nil: none), with fresh plans when one of the statements
// after it asks for them.
func queueLead(b *pgx.Batch, scope *scopeArgs, fresh bool) {
	switch {
	case scope != nil && fresh:
		b.Queue(readScopeFresh, scope.tenant, scope.user)
	case scope != nil:
		b.Queue(readScope, scope.tenant, scope.user)
	case fresh:
		b.Queue(readFresh)
	}
}

// rowsQuerier is a Querier made of its Query alone: QueryRow takes the
// first row, Exec the statement's command tag.
type rowsQuerier func(ctx context.Context, sql string, args ...any) (pgx.Rows, error)

func (f rowsQuerier) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return f(ctx, sql, args...)
}

func (f rowsQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := f(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return firstRow{rows}
}

func (f rowsQuerier) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	rows, err := f(ctx, sql, args...)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	rows.Close()
	return rows.CommandTag(), rows.Err()
}

// pipelineRows are one statement's results in a pipeline: closing them
// calls done, which reads on in the pipeline (to the next statement's
// results, or its end, so the connection is ready for the next use) and
// whose error Err reports.
type pipelineRows struct {
	pgx.Rows
	done   func() error
	closed bool
	err    error
}

func (r *pipelineRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	// The rows are done: read on now, so Err reports a failure there
	// before the caller's deferred Close.
	r.Close()
	return false
}

func (r *pipelineRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.done()
}

func (r *pipelineRows) Err() error {
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

// Read is one read of ReadTenantAll or ReadAll: it sends at most one
// statement, on the Querier it is given.
type Read = func(Querier) error

// ReadTenantAll runs reads, each a function that sends at most one
// statement, with all their statements in one pipeline after the scoping:
// one round trip and one (implicit) transaction for a page that reads
// several independent things, where InTenantTx costs BEGIN, a round trip
// per statement and COMMIT, and ReadTenant a transaction per statement.
// The reads run at once, each in a goroutine of its own, and their
// statements go out once every read has sent one or returned; so a read's
// statement must not wait for another read's result. It returns the
// reads' errors joined. On anything but a pool the reads run one after
// another in InTenantTx.
func ReadTenantAll(ctx context.Context, db Beginner, tenantID int64, reads ...Read) error {
	if tenantID <= 0 {
		return errors.New("tenant read: tenant id must be positive")
	}
	p, ok := db.(connAcquirer)
	if !ok {
		return InTenantTx(ctx, db, tenantID, func(tx pgx.Tx) error { return readInTurn(tx, reads) })
	}
	scope := newScopeArgs(ctx, tenantID)
	return gather(ctx, p, &scope, reads)
}

// ReadAll is ReadTenantAll without the tenant scoping, for the system
// pool's reads (staff pages): their statements in one pipeline, in one
// implicit transaction. On anything but a pool they run one after another
// in InTx.
func ReadAll(ctx context.Context, db Beginner, reads ...Read) error {
	p, ok := db.(connAcquirer)
	if !ok {
		return InTx(ctx, db, func(tx pgx.Tx) error { return readInTurn(tx, reads) })
	}
	return gather(ctx, p, nil, reads)
}

func readInTurn(tx pgx.Tx, reads []Read) error {
	for _, read := range reads {
		if err := read(tx); err != nil {
			return err
		}
	}
	return nil
}

// gather runs reads on a connection of p, their statements in one
// pipeline led by the scoping (none when scope is nil).
func gather(ctx context.Context, p connAcquirer, scope *scopeArgs, reads []Read) error {
	conn, err := p.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("read: acquire connection: %w", err)
	}
	defer conn.Release()
	g := &gathering{ctx: ctx, conn: conn, scope: scope, waiting: len(reads)}
	g.turns = sync.NewCond(&g.mu)
	if len(reads) == 1 {
		// Nothing to wait for: the read's statement goes out as it is
		// queued, so it runs here (a panic goes on after its rows close).
		q := &gatheredQuerier{g: g}
		defer g.finished(q)
		return reads[0](rowsQuerier(q.query))
	}
	errs := make([]error, len(reads))
	panics := make([]any, len(reads))
	var wg sync.WaitGroup
	for i, read := range reads {
		wg.Add(1)
		go func() {
			q := &gatheredQuerier{g: g}
			defer func() {
				// A read that panics still lets the others finish; the
				// panic goes on in the caller's goroutine.
				panics[i] = recover()
				g.finished(q)
				wg.Done()
			}()
			errs[i] = read(rowsQuerier(q.query))
		}()
	}
	wg.Wait()
	for _, pv := range panics {
		if pv != nil {
			panic(pv)
		}
	}
	return errors.Join(errs...)
}

// gathering is one ReadTenantAll or ReadAll: the statements its reads
// queue, sent in one pipeline once no read can queue another, and whose
// results the reads take in the order they were queued.
type gathering struct {
	ctx   context.Context
	conn  *pgxpool.Conn
	scope *scopeArgs // nil: no tenant scoping

	mu      sync.Mutex
	turns   *sync.Cond // signalled when the pipeline is sent and when a turn ends
	waiting int        // reads that have neither queued a statement nor returned
	queue   []queuedStmt
	sent    bool
	br      pgx.BatchResults
	err     error // the pipeline failed before the first statement's results
	turn    int   // the queued statement whose results are read now
}

// gatheredQuerier is one read's statement in a gathering.
type gatheredQuerier struct {
	g      *gathering
	queued bool
	rows   *pipelineRows // its statement's results while they are read
}

var errGatheredTwice = errors.New("read: a read of ReadTenantAll or ReadAll sends one statement")

// query queues the read's statement and returns its results once the
// pipeline is sent and the results before them have been read.
func (q *gatheredQuerier) query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	if q.queued {
		return nil, errGatheredTwice
	}
	q.queued = true
	g := q.g
	g.mu.Lock()
	idx := len(g.queue)
	g.queue = append(g.queue, queuedStmt{sql, args})
	g.waiting--
	g.sendIfReady()
	for !g.sent || (g.err == nil && g.turn != idx) {
		g.turns.Wait()
	}
	err := g.err
	g.mu.Unlock()
	if err != nil {
		return nil, err
	}
	// Only the turn's holder touches the pipeline's results.
	rows, err := g.br.Query()
	if err != nil {
		if rows != nil {
			rows.Close()
		}
		_ = g.endTurn()
		return nil, err
	}
	q.rows = &pipelineRows{Rows: rows, done: g.endTurn}
	return q.rows, nil
}

// sendIfReady sends the pipeline once no read can queue a statement any
// more (g.mu held).
func (g *gathering) sendIfReady() {
	if g.sent || g.waiting > 0 {
		return
	}
	g.sent = true
	defer g.turns.Broadcast()
	if len(g.queue) == 0 {
		return
	}
	// One plan mode per pipeline: custom plans for every statement when
	// one asks for them.
	fresh := false
	for i := range g.queue {
		args, f, err := planMode(g.queue[i].args)
		if err != nil {
			g.err = err
			return
		}
		fresh = fresh || f
		g.queue[i].args = args
	}
	b := &pgx.Batch{}
	queueLead(b, g.scope, fresh)
	lead := b.Len()
	for _, st := range g.queue {
		b.Queue(st.sql, st.args...)
	}
	br := g.conn.SendBatch(g.ctx, b)
	if lead > 0 {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			g.err = err
			return
		}
	}
	g.br = br
}

// endTurn passes the pipeline's results to the next statement's read;
// after the last it reads the pipeline's end and returns its error.
func (g *gathering) endTurn() (err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.turn++
	if g.turn == len(g.queue) {
		err = g.br.Close()
	}
	g.turns.Broadcast()
	return err
}

// finished records that a read returned: one that queued nothing no
// longer holds the pipeline back, and one that left its rows open has
// them closed, so the reads after it get their turn.
func (g *gathering) finished(q *gatheredQuerier) {
	if q.rows != nil {
		q.rows.Close()
	}
	if q.queued {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting--
	g.sendIfReady()
}
