package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/app"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/webhook"
)

// webhook_isolation: one tenant has 40 endpoints whose receiver accepts
// the connection and never answers (each attempt holds its worker for the
// 15 s timeout), and keeps publishing events to them; another tenant has
// one healthy endpoint and publishes 20 events a second for the measured
// window. The figures are the healthy tenant's delivery latency (event
// committed → request at its receiver): with deliveries on their own
// queue, a per-tenant cap and per-endpoint places it stays near an
// unloaded delivery's, whatever the first tenant's receivers do. The
// client (receivers, engine) shares the machine with PostgreSQL.
func init() {
	register(Bench{Name: "webhook_isolation", Labels: "hanging_endpoints=40", Run: runWebhookIsolation})
}

// hangingEndpoints is how many endpoints of the flooding tenant hang.
const hangingEndpoints = 40

func runWebhookIsolation(ctx context.Context, env *Env, _ string) (Result, error) {
	db, app, done, err := webhookDB(ctx, env, "bench_webhooks", 2)
	if err != nil {
		return Result{}, err
	}
	defer done()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived[r.Header.Get("webhook-id")] = time.Now()
		mu.Unlock()
	}))
	defer ok.Close()
	flood, calm := db.Tenants[0], db.Tenants[1]
	for i := 0; i < hangingEndpoints; i++ {
		if err := addEndpoint(ctx, db, flood, fmt.Sprintf("%s/hang/%d", hang.URL, i)); err != nil {
			return Result{}, err
		}
	}
	if err := addEndpoint(ctx, db, calm, ok.URL+"/hook"); err != nil {
		return Result{}, err
	}
	dl, err := newDeliveries(env, db, app, serveConfig(), webhook.Breaker{})
	if err != nil {
		return Result{}, err
	}
	if err := dl.eng.Start(ctx); err != nil {
		return Result{}, err
	}
	defer dl.stop(ctx)
	defer close(release) // before stop: the engine waits for deliveries in flight
	fan := dl.fan
	res := Result{}
	sent, err := publishBoth(ctx, fan, flood, calm, env.Cfg.Duration)
	if err != nil {
		return Result{}, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		mu.Lock()
		n := len(arrived)
		mu.Unlock()
		if n >= len(sent) || waitCtx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling the receiver with a deadline
	}
	mu.Lock()
	defer mu.Unlock()
	var lat []float64
	for id, at := range sent {
		if got, ok := arrived[id]; ok {
			lat = append(lat, float64(got.Sub(at).Microseconds())/1000)
		}
	}
	if len(lat) < len(sent) {
		return Result{}, fmt.Errorf("webhook_isolation: %d of %d healthy deliveries arrived", len(lat), len(sent))
	}
	sort.Float64s(lat)
	res.Metrics = []Metric{{"p95_ms", percentile(lat, 95)}, {"p50_ms", percentile(lat, 50)}, {"p99_ms", percentile(lat, 99)},
		{"deliveries", float64(len(lat))}}
	return res, nil
}

// publishBoth publishes an event to the flooding tenant's 40 endpoints
// and one to the calm tenant's endpoint every 50 ms for dur; it returns
// when each calm event committed, by webhook-id.
func publishBoth(ctx context.Context, fan *webhook.Fanout, flood, calm int64, dur time.Duration) (map[string]time.Time, error) {
	sent := map[string]time.Time{}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	end := time.Now().Add(dur)
	for id := int64(1); time.Now().Before(end); id += 2 {
		if _, err := fan.HandleEvent(ctx, flood, id, "project.created", []byte(`{}`), ""); err != nil {
			return nil, err
		}
		if _, err := fan.HandleEvent(ctx, calm, id+1, "project.created", []byte(`{}`), ""); err != nil {
			return nil, err
		}
		sent[fmt.Sprintf("evt_%d", id+1)] = time.Now()
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return sent, nil
}

func addEndpoint(ctx context.Context, db *JejakDB, tenant int64, url string) error {
	secret, err := webhook.NewSecret()
	if err != nil {
		return err
	}
	_, err = db.Admin.Exec(ctx, `INSERT INTO webhook_endpoints (tenant_id, url, events, secret, created_at, updated_at)
		VALUES ($1, $2, '{*}', $3, now(), now())`, tenant, url, secret)
	return err
}

// webhook_ordered: one endpoint whose receiver refuses every event of one
// aggregate (project/stuck: its first delivery retries on the schedule)
// and takes the others; a backlog of events, one in ten for the stuck
// aggregate, the rest spread over 50 other projects. msgs_per_sec is how
// fast the other aggregates' deliveries arrive, for an ordered endpoint
// (the stuck aggregate's later events wait behind its first) and an
// unordered one: ordering must cost the other aggregates nothing.
func init() {
	for _, ordered := range []bool{false, true} {
		register(Bench{Name: "webhook_ordered", Labels: fmt.Sprintf("ordered=%v", ordered), Run: runWebhookOrdered(ordered)})
	}
}

// orderedEvents is the backlog size.
const orderedEvents = 2000

func runWebhookOrdered(ordered bool) func(ctx context.Context, env *Env, _ string) (Result, error) {
	return func(ctx context.Context, env *Env, _ string) (Result, error) {
		// The smoke tests' one second makes 100.
		n := backlogFor(env, 100, orderedEvents)
		db, app, done, err := webhookDB(ctx, env, "bench_webhooks_ordered", 1)
		if err != nil {
			return Result{}, err
		}
		defer done()
		var mu sync.Mutex
		var first, last time.Time
		got := 0
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b := make([]byte, 512)
			k, _ := r.Body.Read(b)
			if bytes.Contains(b[:k], []byte(`"stuck"`)) {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			mu.Lock()
			if got == 0 {
				first = time.Now()
			}
			got++
			last = time.Now()
			mu.Unlock()
		}))
		defer rcv.Close()
		tenant := db.Tenants[0]
		if err := addEndpoint(ctx, db, tenant, rcv.URL+"/hook"); err != nil {
			return Result{}, err
		}
		if _, err := db.Admin.Exec(ctx, `UPDATE webhook_endpoints SET ordered = $1`, ordered); err != nil {
			return Result{}, err
		}
		// The stuck aggregate's refusals would open the endpoint's breaker,
		// which holds every aggregate: measured here is ordering alone.
		dl, err := newDeliveries(env, db, app, serveConfig(), webhook.Breaker{Failures: math.MaxInt32})
		if err != nil {
			return Result{}, err
		}
		others, err := publishOrdered(ctx, dl.fan, tenant, n)
		if err != nil {
			return Result{}, err
		}
		start := time.Now()
		if err := dl.eng.Start(ctx); err != nil {
			return Result{}, err
		}
		defer dl.stop(ctx)
		arrived := func() int {
			mu.Lock()
			defer mu.Unlock()
			return got
		}
		waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := pollUntil(waitCtx, func() bool { return arrived() >= others }, func() string {
			return fmt.Sprintf("webhook_ordered: %d of %d deliveries of other aggregates arrived", arrived(), others)
		}); err != nil {
			return Result{}, err
		}
		mu.Lock()
		defer mu.Unlock()
		secs := last.Sub(start).Seconds()
		return Result{Metrics: []Metric{{"msgs_per_sec", float64(got) / secs}, {"seconds", secs},
			{"first_ms", float64(first.Sub(start).Microseconds()) / 1000}, {"msgs", float64(got)}}}, nil
	}
}

// backlogFor is the backlog of a webhook line: perSecond events for each
// second of -duration, at least 100, at most most.
func backlogFor(env *Env, perSecond, most int) int {
	return min(most, max(100, int(env.Cfg.Duration.Seconds())*perSecond))
}

// publishOrdered publishes n events, one in ten for project/stuck and the
// rest over 50 other projects; it returns how many are not stuck.
func publishOrdered(ctx context.Context, fan *webhook.Fanout, tenant int64, n int) (others int, err error) {
	for id := 1; id <= n; id++ {
		agg := fmt.Sprintf("p%d", id%50)
		if id%10 == 1 {
			agg = "stuck"
		} else {
			others++
		}
		body := fmt.Sprintf(`{"aggregate":{"type":"project","id":%q}}`, agg)
		if _, err := fan.HandleEvent(ctx, tenant, int64(id), "project.created", []byte(body), ""); err != nil {
			return 0, err
		}
	}
	return others, nil
}

// deliveries is a benchmark's delivery engine (webhook.Queue) and the
// fan-out feeding it; delayed counts the attempts put back for later.
type deliveries struct {
	eng     *job.Engine
	fan     *webhook.Fanout
	delayed *delayCounter
}

// serveConfig is the configuration `serve` runs with by default: the
// delivery engine's workers and tenant concurrency among it.
func serveConfig() app.Config {
	cfg, err := app.FromEnv(func(string) string { return "" })
	if err != nil {
		panic(err) // the defaults themselves are refused: a bug in app
	}
	return cfg
}

// webhookDB creates database base with tenants tenants and opens its
// tenant-facing pool; done closes both and drops the database.
func webhookDB(ctx context.Context, env *Env, base string, tenants int) (*JejakDB, *pgxpool.Pool, func(), error) {
	name := env.DBName(base)
	db, err := env.newJejakDB(ctx, name, tenants)
	if err != nil {
		return nil, nil, nil, err
	}
	app, err := database.Open(ctx, db.URL, int32(env.Cfg.Conns))
	if err != nil {
		db.Close()
		_ = env.DropDatabase(context.WithoutCancel(ctx), name)
		return nil, nil, nil, err
	}
	return db, app, func() {
		app.Close()
		db.Close()
		_ = env.DropDatabase(context.WithoutCancel(ctx), name)
	}, nil
}

// newDeliveries builds the delivery engine as `serve` builds it from cfg,
// not started.
func newDeliveries(env *Env, db *JejakDB, pool *pgxpool.Pool, cfg app.Config, breaker webhook.Breaker) (*deliveries, error) {
	delayed := &delayCounter{}
	c := app.WebhookEngineConfig(cfg, db.System)
	c.WorkerID, c.PollInterval, c.Logger, c.Observer = "bench/webhooks", env.Cfg.PollInterval, env.Log, delayed
	eng, err := job.New(c)
	if err != nil {
		return nil, err
	}
	jobs := webhook.OnQueue(eng, webhook.Queue)
	d := &webhook.Deliverer{App: pool, Jobs: jobs, Logger: env.Log, TenantLimit: cfg.WebhookTenantConcurrency, Breaker: breaker,
		Client: webhook.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}.Client()}
	eng.Register(webhook.Kind, d.Handle, job.KindOptions{MaxAttempts: 3})
	return &deliveries{eng: eng, fan: &webhook.Fanout{System: db.System, Jobs: jobs, Logger: env.Log}, delayed: delayed}, nil
}

// delayCounter counts the engine's delayed attempts.
type delayCounter struct {
	job.NopObserver
	n atomic.Int64
}

func (c *delayCounter) JobDelayed(string, string) { c.n.Add(1) }

// stop lets deliveries in flight finish (within a minute).
func (d *deliveries) stop(ctx context.Context) {
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_ = d.eng.Stop(stopCtx)
}

// webhook_throughput: a backlog of one tenant's events to one endpoint
// whose receiver answers at once, delivered by an engine with the limits
// `serve` runs with: how fast one busy tenant's webhooks can go. Printed:
// deliveries per second from the engine's start to the last arrival, how
// many attempts were put back for later (claimed and not made), and the
// limits.
func init() {
	register(Bench{Name: "webhook_throughput", Labels: "endpoints=1", Run: runWebhookThroughput})
}

// throughputEvents caps the backlog.
const throughputEvents = 5000

func runWebhookThroughput(ctx context.Context, env *Env, _ string) (Result, error) {
	n := backlogFor(env, 500, throughputEvents)
	db, app, done, err := webhookDB(ctx, env, "bench_webhooks_throughput", 1)
	if err != nil {
		return Result{}, err
	}
	defer done()
	var got atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	defer rcv.Close()
	tenant := db.Tenants[0]
	if err := addEndpoint(ctx, db, tenant, rcv.URL+"/hook"); err != nil {
		return Result{}, err
	}
	cfg := serveConfig()
	dl, err := newDeliveries(env, db, app, cfg, webhook.Breaker{})
	if err != nil {
		return Result{}, err
	}
	for id := 1; id <= n; id++ {
		if _, err := dl.fan.HandleEvent(ctx, tenant, int64(id), "project.created", []byte(`{}`), ""); err != nil {
			return Result{}, err
		}
	}
	before, err := cpuNow(ctx, db)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	if err := dl.eng.Start(ctx); err != nil {
		return Result{}, err
	}
	defer dl.stop(ctx)
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := pollUntil(waitCtx, func() bool { return got.Load() >= int64(n) }, func() string {
		return fmt.Sprintf("webhook_throughput: %d of %d deliveries arrived", got.Load(), n)
	}); err != nil {
		return Result{}, err
	}
	secs := time.Since(start).Seconds()
	after, err := cpuNow(ctx, db)
	if err != nil {
		return Result{}, err
	}
	used := after.sub(before)
	per := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(n) }
	return Result{Metrics: []Metric{{"deliveries_per_sec", float64(n) / secs}, {"seconds", secs},
		{"put_back", float64(dl.delayed.n.Load())}, {"deliveries", float64(n)},
		{"claims", float64(dl.eng.Stats().Claims)},
		{"client_cpu_per_delivery_ms", per(used.webCPU)}, {"pg_cpu_per_delivery_ms", per(used.pgCPU)},
		{"workers", float64(cfg.WebhookWorkers)}, {"tenant_concurrency", float64(cfg.WebhookTenantConcurrency)}}}, nil
}

// cpuNow reads this process's CPU time (the engine, the receiver and the
// benchmark itself, in webCPU) and that of db's backends.
func cpuNow(ctx context.Context, db *JejakDB) (counters, error) {
	self, err := processCPU(os.Getpid())
	if err != nil {
		return counters{}, fmt.Errorf("own CPU: %w", err)
	}
	pg, err := backendCPU(ctx, db.Admin)
	return counters{webCPU: self, pgByPid: pg}, err
}
