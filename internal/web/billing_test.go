package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/app"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/kinds"
	"github.com/jejakhq/jejak/internal/payment"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/web"
)

// TestUpgradeDoubleChargeReconciledOverHTTP: the owner upgrades to a paid
// plan (invoice and charge job in the plan change's transaction); the
// simulated provider charges, its answer times out, the retry charges
// again; staff reconcile from the tenant page; the owner's billing page
// shows the invoice, both charges and the refund, and the trail has the
// detection and the refund.
func TestUpgradeDoubleChargeReconciledOverHTTP(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	sim := payment.NewSimulator(db.System)
	simSrv := httptest.NewServer(sim.Handler())
	t.Cleanup(simSrv.Close)
	log := quietLog()
	clk := clock.Database{}
	engine, err := job.New(job.Config{Pool: db.System, Clock: clk, Logger: log, WorkerID: "billing-test", Backoff: func(int) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	payments := payment.NewService(db.App, db.System, &payment.HTTPProvider{BaseURL: simSrv.URL, Client: &http.Client{Timeout: 300 * time.Millisecond}}, engine, clk)
	kinds.Register(engine, kinds.Deps{App: db.App, System: db.System, Clock: clk, Payments: payments})
	deps := app.NewDeps(db.App, db.System, engine, clk, log)
	app.WithPayments(&deps, payments)
	srv := httptest.NewServer(web.New(deps))
	t.Cleanup(srv.Close)
	f := &fixture{t: t, db: db, srv: srv, jobs: engine}
	senja := f.tenantID("kopi-senja")

	owner := f.client()
	owner.login("sari@senja.test")
	sim.IgnoreIdempotency(true)
	sim.TimeoutAfterChargeNext(1)
	if a := owner.post("/t/kopi-senja/plan", owner.withCSRF(url.Values{"plan": {"pro"}}), false); a.status != http.StatusSeeOther {
		t.Fatalf("upgrade: %d %.300s", a.status, a.body)
	}
	if n := f.count(`SELECT count(*) FROM jobs WHERE tenant_id = $1 AND kind = 'payment.charge'`, senja); n != 1 {
		t.Fatalf("charge jobs after upgrade: %d", n)
	}
	f.work(5) // charged, answer lost
	f.work(5) // charged again
	if n := f.count(`SELECT count(*) FROM paysim_charges`); n != 2 {
		t.Fatalf("provider charges: %d", n)
	}
	staff := f.client()
	staff.login("support@jejak.test")
	if a := staff.post("/admin/tenants/kopi-senja/reconcile", staff.withCSRF(nil), false); a.status != http.StatusSeeOther {
		t.Fatalf("reconcile: %d %.300s", a.status, a.body)
	}
	f.work(5)
	if n := f.count(`SELECT count(*) FROM paysim_refunds`); n != 1 {
		t.Fatalf("refunds: %d", n)
	}
	page := owner.get("/t/kopi-senja/billing")
	if page.status != http.StatusOK || strings.Count(page.body, `data-testid="charge-row"`) != 2 ||
		strings.Count(page.body, `data-testid="refund-row"`) != 1 || !strings.Contains(page.body, "duplicate, refunded") ||
		!strings.Contains(page.body, ">paid<") {
		t.Fatalf("billing page: %d %.2000s", page.status, page.body)
	}
	trail := owner.get("/t/kopi-senja/audit?entity=invoice")
	for _, a := range []string{"payment.duplicate_detected", "payment.refunded", "payment.charged", "invoice.created"} {
		if !strings.Contains(trail.body, a) {
			t.Errorf("owner trail misses %s", a)
		}
	}
	// Another tenant's owner sees none of it.
	other := f.client()
	other.login("budi@melati.test")
	if a := other.get("/t/kopi-senja/billing"); a.status != http.StatusNotFound {
		t.Fatalf("cross-tenant billing: %d", a.status)
	}
	if a := other.get("/t/toko-bunga-melati/billing"); strings.Contains(a.body, "charge-row") {
		t.Fatal("another tenant's billing shows charges")
	}
}
