package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
	"github.com/jejakhq/jejak/internal/webhook"
)

// hangingReceiver accepts requests and answers none until released,
// counting how many it holds at once.
type hangingReceiver struct {
	*httptest.Server
	mu            sync.Mutex
	inFlight, max int
	release       chan struct{}
	releaseOnce   sync.Once
}

// answer lets every held request and every later one finish.
func (h *hangingReceiver) answer() { h.releaseOnce.Do(func() { close(h.release) }) }

func newHangingReceiver(t *testing.T) *hangingReceiver {
	h := &hangingReceiver{release: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.inFlight++
		h.max = max(h.max, h.inFlight)
		h.mu.Unlock()
		select {
		case <-h.release:
		case <-r.Context().Done():
		}
		h.mu.Lock()
		h.inFlight--
		h.mu.Unlock()
	}))
	t.Cleanup(func() {
		h.answer()
		h.Close()
	})
	return h
}

func (h *hangingReceiver) counts() (inFlight, max int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inFlight, h.max
}

// TestDeliveriesIsolatedFromOtherWork: a tenant whose endpoints all hang
// holds at most its share of the delivery workers, never the engine's
// workers: another tenant's delivery goes out, and both tenants' other
// jobs run, while every request of the first tenant is still hanging.
func TestDeliveriesIsolatedFromOtherWork(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	flood, calm := seedTenant(t, db, "flood"), seedTenant(t, db, "calm")
	hang := newHangingReceiver(t)
	ok := newReceiver(t, nil, 200)

	main, err := job.New(job.Config{Pool: db.System, Workers: 2, WorkerID: "main", PollInterval: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	probes := make(chan int64, 4)
	main.Register("probe", func(_ context.Context, j *job.Job) error { probes <- j.TenantID; return nil }, job.KindOptions{})
	wh, err := job.New(job.Config{Pool: db.System, Workers: 3, WorkerID: "main/webhooks", Queues: []string{webhook.Queue},
		NoMaintenance: true, PollInterval: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	jobs := webhook.OnQueue(main, webhook.Queue)
	d := &webhook.Deliverer{App: db.App, Jobs: jobs, Client: webhook.Guard{Allow: loopback}.Client(), Logger: quiet, TenantLimit: 2}
	wh.Register(webhook.Kind, d.Handle, job.KindOptions{MaxAttempts: 3})
	svc := webhook.NewService(db.App, nil, jobs)
	for i := 0; i < 6; i++ {
		if _, err := svc.Create(ctx, flood.tenant, flood.owner, fmt.Sprintf("%s/hook-%d", hang.URL, i), "*"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.Create(ctx, calm.tenant, calm.owner, ok.URL+"/hook", "*"); err != nil {
		t.Fatal(err)
	}
	fan := &webhook.Fanout{System: db.System, Jobs: jobs, Logger: quiet}
	if _, err := fan.HandleEvent(ctx, flood.tenant, 1, "project.created", []byte(`{"id":"evt_1"}`), "t1"); err != nil {
		t.Fatal(err)
	}
	for _, e := range []*job.Engine{main, wh} {
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = e.Stop(stopCtx)
		})
	}
	t.Cleanup(hang.answer) // before the engines stop: they wait for deliveries in flight
	testwait.For(t, "the flooding tenant's deliveries hanging", func() bool { n, _ := hang.counts(); return n == 2 })

	if _, err := fan.HandleEvent(ctx, calm.tenant, 2, "project.created", []byte(`{"id":"evt_2"}`), "t2"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the other tenant's delivery", func() bool { return len(ok.all()) == 1 })
	for _, tn := range []int64{flood.tenant, calm.tenant} {
		if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error {
			_, err := main.Enqueue(ctx, tx, job.EnqueueParams{TenantID: tn, Kind: "probe", Payload: []byte(`{}`)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	ran := map[int64]bool{}
	deadline := time.After(10 * time.Second)
	for len(ran) < 2 {
		select {
		case tn := <-probes:
			ran[tn] = true
		case <-deadline:
			t.Fatalf("jobs of the default queue did not run while deliveries hung (ran %v)", ran)
		}
	}
	if n, most := hang.counts(); n != 2 || most != 2 {
		t.Fatalf("the hanging receiver holds %d requests (at most %d), want 2 (the tenant's limit)", n, most)
	}
}

type seeded struct {
	tenant int64
	owner  webhook.Actor
}

// seedTenant adds a tenant and its owner.
func seedTenant(t *testing.T, db *testdb.DB, slug string) seeded {
	t.Helper()
	ctx := context.Background()
	var tid, uid int64
	if err := db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id", slug).Scan(&tid); err != nil {
		t.Fatal(err)
	}
	if err := db.Admin.QueryRow(ctx, "INSERT INTO users (email, name, password_hash) VALUES ($1, 'Owner', 'x') RETURNING id", slug+"@test.test").Scan(&uid); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, "INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'owner')", tid, uid); err != nil {
		t.Fatal(err)
	}
	return seeded{tenant: tid, owner: webhook.Actor{UserID: uid, Role: "owner", TraceID: "trace-" + slug}}
}

// TestHangingEndpointLeavesTheTenantsOtherEndpoints: with the tenant's
// concurrency at 2, one endpoint that hangs holds one delivery worker at
// most, so the same tenant's healthy endpoint keeps receiving.
func TestHangingEndpointLeavesTheTenantsOtherEndpoints(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tn := seedTenant(t, db, "mixed")
	hang := newHangingReceiver(t)
	ok := newReceiver(t, nil, 200)
	svc := webhook.NewService(db.App, nil, nil)
	if _, err := svc.Create(ctx, tn.tenant, tn.owner, hang.URL+"/stuck", "*"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, tn.tenant, tn.owner, ok.URL+"/fine", "*"); err != nil {
		t.Fatal(err)
	}
	const events = 6
	deliveryEngine(t, db, tn.tenant, 2, events)
	t.Cleanup(hang.answer) // before the engine stops: it waits for deliveries in flight
	testwait.For(t, "every event at the healthy endpoint", func() bool { return len(ok.all()) == events })
	if n, most := hang.counts(); n != 1 || most != 1 {
		t.Fatalf("the hanging endpoint holds %d requests (at most %d), want 1", n, most)
	}
}

// TestOneRefusalLeavesAnEndpointItsPlaces: an endpoint whose last attempt
// failed, once, still gets its share of the tenant's places (here 3 of 4),
// so one refused event does not slow the endpoint's other deliveries to
// one at a time; after three failures in a row it gets one place.
func TestOneRefusalLeavesAnEndpointItsPlaces(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		failures, want int
	}{{1, 3}, {3, 1}} {
		t.Run(fmt.Sprintf("failures=%d", c.failures), func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t)
			ctx := context.Background()
			tn := seedTenant(t, db, "refusing")
			hang := newHangingReceiver(t)
			c0, err := webhook.NewService(db.App, nil, nil).Create(ctx, tn.tenant, tn.owner, hang.URL+"/hook", "*")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Admin.Exec(ctx, "UPDATE webhook_endpoints SET consecutive_failures = $2, failing_since = now() WHERE id = $1",
				c0.Endpoint.ID, c.failures); err != nil {
				t.Fatal(err)
			}
			deliveryEngine(t, db, tn.tenant, 4, 4)
			t.Cleanup(hang.answer)
			testwait.For(t, fmt.Sprintf("%d deliveries at the endpoint at once", c.want), func() bool { n, _ := hang.counts(); return n == c.want })
			// Every delivery not at the receiver has been claimed and put back
			// at least once: a place it was refused, not one still to come.
			testwait.For(t, "the others put back", func() bool {
				var n int
				if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE queue = $1 AND state = 'pending' AND available_at > now()`,
					webhook.Queue).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n == 4-c.want
			})
			if n, most := hang.counts(); n != c.want || most != c.want {
				t.Fatalf("the endpoint holds %d requests (at most %d), want %d", n, most, c.want)
			}
		})
	}
}

// deliveryEngine fans events 1..events of tenant out to its endpoints,
// then starts a webhook engine of 4 workers whose Deliverer has a tenant
// limit of tenantLimit; the engine stops at clean-up.
func deliveryEngine(t *testing.T, db *testdb.DB, tenant int64, tenantLimit, events int) {
	t.Helper()
	ctx := context.Background()
	wh, err := job.New(job.Config{Pool: db.System, Workers: 4, WorkerID: "wh", Queues: []string{webhook.Queue},
		PollInterval: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	jobs := webhook.OnQueue(wh, webhook.Queue)
	d := &webhook.Deliverer{App: db.App, Jobs: jobs, Client: webhook.Guard{Allow: loopback}.Client(), Logger: quiet, TenantLimit: tenantLimit}
	wh.Register(webhook.Kind, d.Handle, job.KindOptions{MaxAttempts: 3})
	fan := &webhook.Fanout{System: db.System, Jobs: jobs, Logger: quiet}
	for i := 1; i <= events; i++ {
		if _, err := fan.HandleEvent(ctx, tenant, int64(i), "project.created", []byte(fmt.Sprintf(`{"id":"evt_%d"}`, i)), "t"); err != nil {
			t.Fatal(err)
		}
	}
	if err := wh.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = wh.Stop(stopCtx)
	})
}
