package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/app"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/web"
)

// Buffers per page: what one request of each page reads from PostgreSQL's
// shared buffers, on the scale database. Timings on a shared machine are
// noisy; buffer counts are not (they move only with B-tree page splits and
// how much of the table vacuum has marked all-visible), so they show
// whether a page reads rows it does not show. The real handler serves
// each page once through pools whose queries are captured (SQL, arguments,
// and the tenant and user the transaction was scoped to); every captured
// read is then re-run under EXPLAIN (ANALYZE, BUFFERS) as the same login
// role and scope, in a transaction rolled back afterwards. The result is
// the request's total shared buffers (hit + read) and its slowest query;
// the queries themselves are printed as # lines. EXPLAIN with arguments
// plans for their values, but the app runs most statements prepared, on
// the connection's cached generic plan: those are also run on their
// generic plan ("g" on the # lines), and as_run_shared_buffers adds up the
// plans the app runs (generic where it prepares, custom where it asks for
// fresh plans).

func init() {
	for _, p := range pages {
		register(Bench{Name: "buffers " + strings.TrimPrefix(p.name, "page "), Run: buffersBench(p)})
	}
}

// capturedQuery is one statement a page ran.
type capturedQuery struct {
	role, sql    string
	args         []any
	tenant, user string // app.tenant_id / app.user_id of its transaction
	// cached: the app runs it as a prepared statement, so after a few
	// calls on the connection's generic plan; not when it asked for fresh
	// plans (database.FreshPlans).
	cached bool
}

// queryCapture records the statements of pools it traces, with the scope
// set_config gave their transaction.
type queryCapture struct {
	role string
	mu   *sync.Mutex
	qs   *[]capturedQuery
	// scope per connection: set by set_config, cleared at the end of a
	// transaction.
	scope map[*pgx.Conn][2]string
	// inTx: connections inside BEGIN … COMMIT, whose scope outlives a
	// batch sent within the transaction.
	inTx map[*pgx.Conn]bool
	// freshBatch: connections whose current pipeline asked for fresh
	// plans in its lead.
	freshBatch map[*pgx.Conn]bool
}

// newQueryCapture records role's statements into qs under mu.
func newQueryCapture(role string, mu *sync.Mutex, qs *[]capturedQuery) *queryCapture {
	return &queryCapture{role: role, mu: mu, qs: qs, scope: map[*pgx.Conn][2]string{},
		inTx: map[*pgx.Conn]bool{}, freshBatch: map[*pgx.Conn]bool{}}
}

var (
	txEnd        = regexp.MustCompile(`(?i)^\s*(commit|rollback|end)\b`)
	literalScope = regexp.MustCompile(`set_config\('app\.tenant_id', '(\d*)', true\), set_config\('app\.user_id', '(\d*)', true\)`)
)

func (c *queryCapture) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.record(conn, d.SQL, d.Args)
	return ctx
}

func (c *queryCapture) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Tenant reads send the scoping and their statement in one pipeline
// (database.ReadTenant), whose implicit transaction ends with the batch.
func (c *queryCapture) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *queryCapture) TraceBatchQuery(_ context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.record(conn, d.SQL, d.Args)
}

func (c *queryCapture) TraceBatchEnd(_ context.Context, conn *pgx.Conn, _ pgx.TraceBatchEndData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.inTx[conn] {
		delete(c.scope, conn)
	}
	delete(c.freshBatch, conn)
}

// record notes one statement: the scoping and transaction boundaries
// update conn's scope, anything else is captured with it.
func (c *queryCapture) record(conn *pgx.Conn, rawSQL string, rawArgs []any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sql := strings.TrimSpace(rawSQL)
	args := make([]any, 0, len(rawArgs))
	fresh := c.freshBatch[conn]
	for _, a := range rawArgs {
		if mode, ok := a.(pgx.QueryExecMode); ok {
			fresh = fresh || mode == pgx.QueryExecModeExec
		} else {
			args = append(args, a)
		}
	}
	if strings.Contains(sql, "'plan_cache_mode', 'force_custom_plan'") {
		c.freshBatch[conn] = true
	}
	switch {
	case strings.HasPrefix(sql, "SELECT set_config('plan_cache_mode'"):
		// An unscoped pipeline's lead (database.ReadAll with fresh plans).
		return
	case literalScope.MatchString(sql):
		// InTenantTx: "BEGIN; SELECT set_config(… '4' …)", one simple
		// statement with the ids written in.
		m := literalScope.FindStringSubmatch(sql)
		c.scope[conn] = [2]string{m[1], m[2]}
		c.inTx[conn] = strings.HasPrefix(strings.ToLower(sql), "begin")
		return
	case strings.Contains(sql, "set_config('app.tenant_id'"):
		if len(args) == 2 {
			c.scope[conn] = [2]string{fmt.Sprint(args[0]), fmt.Sprint(args[1])}
		}
		return
	case txEnd.MatchString(sql):
		delete(c.scope, conn)
		delete(c.inTx, conn)
		return
	case strings.HasPrefix(strings.ToLower(sql), "begin"):
		c.inTx[conn] = true
		return
	}
	s := c.scope[conn]
	*c.qs = append(*c.qs, capturedQuery{role: c.role, sql: rawSQL, args: args, tenant: s[0], user: s[1], cached: !fresh})
}

// buffersEnv is a dashboard over the scale database whose queries are
// captured, and untraced pools of the same roles to explain them.
type buffersEnv struct {
	mu           sync.Mutex
	qs           []capturedQuery
	srv          *httptest.Server
	clients      map[string]*http.Client
	explainPools map[string]*pgxpool.Pool
}

var (
	buffersOnce sync.Once
	buffersE    *buffersEnv
	buffersErr  error
)

func getBuffers(ctx context.Context, env *Env) (*buffersEnv, error) {
	buffersOnce.Do(func() { buffersE, buffersErr = openBuffers(ctx, env) })
	return buffersE, buffersErr
}

func openBuffers(ctx context.Context, env *Env) (*buffersEnv, error) {
	s, err := getScale(ctx, env)
	if err != nil {
		return nil, err
	}
	b := &buffersEnv{clients: map[string]*http.Client{}, explainPools: map[string]*pgxpool.Pool{}}
	traced := map[string]*pgxpool.Pool{}
	for _, role := range []string{database.AppRole, database.SystemRole} {
		login, err := database.LoginURL(ctx, s.url, role)
		if err != nil {
			return nil, err
		}
		// Both pools as the app's: its connection parameters (planner
		// settings among them) decide the plans explained.
		cfg, err := database.PoolConfig(login, role, 4)
		if err != nil {
			return nil, err
		}
		cfg.ConnConfig.Tracer = newQueryCapture(role, &b.mu, &b.qs)
		if traced[role], err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
			return nil, err
		}
		if cfg, err = database.PoolConfig(login, role, 0); err != nil {
			return nil, err
		}
		if b.explainPools[role], err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
			return nil, err
		}
	}
	engine, err := job.New(job.Config{Pool: traced[database.SystemRole], Logger: env.Log})
	if err != nil {
		return nil, err
	}
	deps := app.NewDeps(traced[database.AppRole], traced[database.SystemRole], engine, clock.Database{}, env.Log)
	deps.StatsMaxAge = -1 // every request rebuilds the overview: its queries are the page's cost
	b.srv = httptest.NewServer(web.New(deps))
	for _, who := range []string{"budi@melati.test", "dewi@batik.test", "support@jejak.test"} {
		if b.clients[who], err = signedInClient(ctx, b.srv.URL, who); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// queryPlan is one explained statement.
type queryPlan struct {
	name    string
	buffers int64
	ms      float64
	scans   []string
	// generic is the buffers of the generic plan of a statement the app
	// runs prepared (the plan it runs once the connection has cached one),
	// -1 for the others.
	generic int64
}

var firstLineName = regexp.MustCompile(`^-- name: (\w+)`)

func buffersBench(p page) func(context.Context, *Env, string) (Result, error) {
	return func(ctx context.Context, env *Env, _ string) (Result, error) {
		b, err := getBuffers(ctx, env)
		if err != nil {
			return Result{}, err
		}
		s, _ := getScale(ctx, env)
		rng := rand.New(rand.NewPCG(5, 6))
		path := strings.ReplaceAll(p.path, "{trace}", s.traces[rng.IntN(len(s.traces))])
		path = strings.ReplaceAll(path, "{older}", strconv.FormatInt(s.olderCursor(rng), 10))
		get := func() error {
			res, err := b.clients[p.as].Get(b.srv.URL + path)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: status %d", path, res.StatusCode)
			}
			return nil
		}
		// Once unrecorded (session and statement caches warm), once recorded.
		if err := get(); err != nil {
			return Result{}, err
		}
		b.mu.Lock()
		b.qs = nil
		b.mu.Unlock()
		if err := get(); err != nil {
			return Result{}, err
		}
		b.mu.Lock()
		qs := b.qs
		b.qs = nil
		b.mu.Unlock()

		var total, asRun int64
		var slowest float64
		var plans []queryPlan
		for _, q := range qs {
			pl, err := b.explain(ctx, q)
			if err != nil {
				return Result{}, err
			}
			total += pl.buffers
			if pl.generic >= 0 {
				asRun += pl.generic
			} else {
				asRun += pl.buffers
			}
			slowest = max(slowest, pl.ms)
			plans = append(plans, pl)
		}
		sort.SliceStable(plans, func(i, j int) bool { return plans[i].buffers > plans[j].buffers })
		for _, pl := range plans {
			g := "         "
			if pl.generic >= 0 {
				g = fmt.Sprintf("(g %6d)", pl.generic)
			}
			fmt.Printf("#   %s: %-32s %6d buffers %s %7.2f ms  %s\n", p.name, pl.name, pl.buffers, g, pl.ms, strings.Join(pl.scans, ", "))
		}
		return Result{Metrics: []Metric{
			{"shared_buffers", float64(total)}, {"as_run_shared_buffers", float64(asRun)},
			{"queries", float64(len(qs))}, {"slowest_query_ms", slowest},
		}}, nil
	}
}

// explain re-runs q under EXPLAIN (ANALYZE, BUFFERS) in its role and
// scope, rolled back.
func (b *buffersEnv) explain(ctx context.Context, q capturedQuery) (queryPlan, error) {
	pl := queryPlan{name: "(unnamed)", generic: -1}
	if m := firstLineName.FindStringSubmatch(strings.TrimSpace(q.sql)); m != nil {
		pl.name = m[1]
	} else {
		pl.name = strings.Join(strings.Fields(q.sql), " ")
		if len(pl.name) > 40 {
			pl.name = pl.name[:40]
		}
	}
	lower := strings.ToLower(strings.TrimSpace(q.sql))
	if strings.HasPrefix(lower, "listen") || strings.HasPrefix(lower, "set ") {
		return pl, nil
	}
	tx, err := b.explainPools[q.role].Begin(ctx)
	if err != nil {
		return pl, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if q.tenant != "" {
		if _, err := tx.Exec(ctx, "SELECT set_config('app.tenant_id', $1, true), set_config('app.user_id', $2, true)", q.tenant, q.user); err != nil {
			return pl, err
		}
	}
	var raw []byte
	args := append([]any{pgx.QueryExecModeExec}, q.args...)
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+q.sql, args...).Scan(&raw); err != nil {
		return pl, fmt.Errorf("explain %s: %w", pl.name, err)
	}
	top, ms, buffers, err := explained(raw)
	if err != nil {
		return pl, fmt.Errorf("explain %s: %w", pl.name, err)
	}
	pl.buffers, pl.ms = buffers, ms
	if q.cached && len(q.args) > 0 {
		if _, pl.generic, err = explainGeneric(ctx, tx, q); err != nil {
			return pl, fmt.Errorf("explain %s's generic plan: %w", pl.name, err)
		}
	}
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if loops, _ := n["Actual Loops"].(float64); loops == 0 {
			return
		}
		if ix, ok := n["Index Name"].(string); ok {
			pl.scans = append(pl.scans, ix)
		} else if n["Node Type"] == "Seq Scan" {
			pl.scans = append(pl.scans, "seq "+fmt.Sprint(n["Relation Name"]))
		}
		if kids, ok := n["Plans"].([]any); ok {
			for _, k := range kids {
				walk(k.(map[string]any))
			}
		}
	}
	walk(top)
	return pl, nil
}

// explained reads EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON): the top node,
// the execution time and the shared buffers it read.
func explained(raw []byte) (top map[string]any, ms float64, buffers int64, err error) {
	var out []struct {
		Plan          map[string]any `json:"Plan"`
		ExecutionTime float64        `json:"Execution Time"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		return nil, 0, 0, fmt.Errorf("read plan: %v", err)
	}
	top = out[0].Plan
	for _, k := range []string{"Shared Hit Blocks", "Shared Read Blocks"} {
		if v, ok := top[k].(float64); ok {
			buffers += int64(v)
		}
	}
	return top, out[0].ExecutionTime, buffers, nil
}

// explainGeneric runs q on the generic plan PostgreSQL caches for it as a
// prepared statement (EXPLAIN with arguments plans for their values, as
// an unnamed statement would) and returns that plan and the shared
// buffers it read. A prepared statement keeps its generic plan as its
// tables grow until they are analyzed again: this is the plan a page runs
// on a warm connection.
func explainGeneric(ctx context.Context, tx pgx.Tx, q capturedQuery) (top map[string]any, buffers int64, err error) {
	const name = "bench_generic"
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		return nil, 0, err
	}
	if _, err := tx.Conn().Prepare(ctx, name, q.sql); err != nil {
		return nil, 0, err
	}
	defer func() { _ = tx.Conn().Deallocate(context.WithoutCancel(ctx), name) }()
	params := make([]string, len(q.args))
	for i := range params {
		params[i] = "$" + strconv.Itoa(i+1)
	}
	// EXECUTE's arguments as literals, which take the prepared statement's
	// parameter types (a described EXPLAIN reports no parameters to type).
	args := append([]any{pgx.QueryExecModeSimpleProtocol}, q.args...)
	var raw []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE "+name+"("+strings.Join(params, ", ")+")", args...).Scan(&raw); err != nil {
		return nil, 0, err
	}
	top, _, buffers, err = explained(raw)
	return top, buffers, err
}
