package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sort"
	"sync"
	"time"

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
	name := env.DBName("bench_webhooks")
	db, err := env.newJejakDB(ctx, name, 2)
	if err != nil {
		return Result{}, err
	}
	defer env.DropDatabase(context.WithoutCancel(ctx), name) //nolint:errcheck
	defer db.Close()
	app, err := database.Open(ctx, db.URL, int32(env.Cfg.Conns))
	if err != nil {
		return Result{}, err
	}
	defer app.Close()
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
	eng, err := job.New(job.Config{Pool: db.System, Workers: 4, WorkerID: "bench/webhooks", Queues: []string{webhook.Queue},
		NoMaintenance: true, PollInterval: env.Cfg.PollInterval, Logger: env.Log})
	if err != nil {
		return Result{}, err
	}
	jobs := webhook.OnQueue(eng, webhook.Queue)
	d := &webhook.Deliverer{App: app, Jobs: jobs, Logger: env.Log, TenantLimit: 2,
		Client: webhook.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}.Client()}
	eng.Register(webhook.Kind, d.Handle, job.KindOptions{MaxAttempts: 3})
	fan := &webhook.Fanout{System: db.System, Jobs: jobs, Logger: env.Log}
	if err := eng.Start(ctx); err != nil {
		return Result{}, err
	}
	defer func() {
		close(release)
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = eng.Stop(stopCtx)
	}()
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
