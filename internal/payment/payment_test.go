package payment_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/kinds"
	"github.com/jejakhq/jejak/internal/payment"
	"github.com/jejakhq/jejak/internal/testdb"
)

type env struct {
	t      *testing.T
	db     *testdb.DB
	sim    *payment.Simulator
	svc    *payment.Service
	engine *job.Engine
	tenant int64
	owner  int64
}

// setup runs the simulator over real HTTP; the provider client gives up
// after 300 ms, so a charge that hangs after committing times out.
func setup(t *testing.T) *env {
	t.Helper()
	db := testdb.New(t)
	ctx := context.Background()
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	sim := payment.NewSimulator(db.System)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	clk := clock.Database{}
	e, err := job.New(job.Config{Pool: db.System, Clock: clk, WorkerID: "payment-test", Backoff: func(int) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	prov := &payment.HTTPProvider{BaseURL: srv.URL, Client: &http.Client{Timeout: 300 * time.Millisecond}}
	svc := payment.NewService(db.App, db.System, prov, e, clk)
	kinds.Register(e, kinds.Deps{App: db.App, System: db.System, Clock: clk, Payments: svc})
	v := &env{t: t, db: db, sim: sim, svc: svc, engine: e}
	v.tenant = v.n(`SELECT id FROM tenants WHERE slug = 'kopi-senja'`)
	v.owner = v.n(`SELECT id FROM users WHERE email = 'sari@senja.test'`)
	return v
}

func (v *env) n(sql string, args ...any) int64 {
	v.t.Helper()
	var n int64
	if err := v.db.Admin.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		v.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (v *env) work() {
	v.t.Helper()
	if _, err := v.engine.WorkOnce(context.Background(), 10); err != nil {
		v.t.Fatal(err)
	}
}

// upgrade creates an invoice for the pro plan and its charge job.
func (v *env) upgrade() int64 {
	v.t.Helper()
	err := database.InTenantTx(context.Background(), v.db.App, v.tenant, func(tx pgx.Tx) error {
		return v.svc.OnPlanChange(context.Background(), tx, v.tenant, &v.owner, "pro", "trace-upgrade")
	})
	if err != nil {
		v.t.Fatal(err)
	}
	return v.n(`SELECT max(id) FROM invoices WHERE tenant_id = $1`, v.tenant)
}

// doubleCharge drives the classic double charge: the provider charges,
// its answer times out, the retry charges again (the provider does not
// honour the idempotency key). It returns the invoice id.
func (v *env) doubleCharge() int64 {
	v.t.Helper()
	v.sim.IgnoreIdempotency(true)
	v.sim.TimeoutAfterChargeNext(1)
	inv := v.upgrade()
	v.work() // charged, answer lost: transient failure, retried
	if st := v.n(`SELECT count(*) FROM invoices WHERE id = $1 AND status = 'open'`, inv); st != 1 {
		v.t.Fatalf("invoice should still be open after a lost answer")
	}
	v.work() // charged again
	if c := v.n(`SELECT count(*) FROM paysim_charges WHERE invoice_ref = 'inv_' || $1::bigint`, inv); c != 2 {
		v.t.Fatalf("provider has %d charges, want the double charge (2)", c)
	}
	if st := v.n(`SELECT count(*) FROM invoices WHERE id = $1 AND status = 'paid'`, inv); st != 1 {
		v.t.Fatal("invoice not paid after the retry")
	}
	v.sim.IgnoreIdempotency(false)
	return inv
}

func (v *env) reconcileJob() *job.Job {
	v.t.Helper()
	var id int64
	err := database.InTx(context.Background(), v.db.System, func(tx pgx.Tx) error {
		enq, err := v.engine.Enqueue(context.Background(), tx, job.EnqueueParams{TenantID: v.tenant, Kind: payment.ReconcileKind,
			Payload: payment.ReconcilePayload(v.tenant), TraceID: "trace-reconcile"})
		id = enq.ID
		return err
	})
	if err != nil {
		v.t.Fatal(err)
	}
	return &job.Job{ID: id, TenantID: v.tenant, Kind: payment.ReconcileKind, Payload: payment.ReconcilePayload(v.tenant), TraceID: "trace-reconcile"}
}

// TestDoubleChargeRefundedOnceWhenRunTwice: reconciliation run twice (two
// jobs, one after the other) refunds the duplicate exactly once, through
// the provider, and records detection and refund once in the trail.
func TestDoubleChargeRefundedOnceWhenRunTwice(t *testing.T) {
	t.Parallel()
	v := setup(t)
	inv := v.doubleCharge()
	v.reconcileJob()
	v.work()
	v.reconcileJob()
	v.work()
	if n := v.n(`SELECT count(*) FROM paysim_refunds`); n != 1 {
		t.Fatalf("provider refunds: %d, want 1", n)
	}
	if n := v.n(`SELECT count(*) FROM payment_refunds WHERE invoice_id = $1`, inv); n != 1 {
		t.Fatalf("refund records: %d", n)
	}
	// The charge kept is the one the invoice was paid with.
	if n := v.n(`SELECT count(*) FROM paysim_charges c JOIN invoices i ON i.charge_ref = c.id WHERE i.id = $1 AND c.refunded = 0`, inv); n != 1 {
		t.Fatal("the invoice's own charge was refunded")
	}
	for _, a := range []string{"payment.duplicate_detected", "payment.refunded", "payment.charged"} {
		if n := v.n(`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = $2`, v.tenant, a); n != 1 {
			t.Fatalf("%s recorded %d times", a, n)
		}
	}
	// The charge job's lifecycle is in the trail: failed + retried, then succeeded.
	if n := v.n(`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action IN ('job.failed', 'job.retried', 'job.succeeded') AND trace_id = 'trace-upgrade'`, v.tenant); n != 3 {
		t.Fatalf("charge lifecycle events: %d", n)
	}
	var detail map[string]any
	if err := v.db.Admin.QueryRow(context.Background(), `SELECT detail FROM audit_events WHERE action = 'payment.refunded'`).Scan(&detail); err != nil {
		t.Fatal(err)
	}
	if detail["refund"] == "" || detail["amount_idr"] == nil {
		t.Fatalf("refund detail %v", detail)
	}
	b, err := v.svc.Billing(context.Background(), v.tenant)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Invoices) != 1 || len(b.Refunds) != 1 || len(b.Charges) != 2 {
		t.Fatalf("billing: %d invoices, %d refunds, %d charges", len(b.Invoices), len(b.Refunds), len(b.Charges))
	}
}

// TestDoubleChargeRefundedOnceUnderConcurrentDelivery: the same
// reconciliation delivered to several workers at once refunds once.
func TestDoubleChargeRefundedOnceUnderConcurrentDelivery(t *testing.T) {
	t.Parallel()
	v := setup(t)
	v.doubleCharge()
	jobs := []*job.Job{v.reconcileJob(), v.reconcileJob(), v.reconcileJob(), v.reconcileJob()}
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := v.svc.Reconcile(context.Background(), j); err != nil {
				if _, _, delayed := job.DelayOf(err); !delayed {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	// And with the lock out of the way, all at once again straight at the
	// refund step (each its own holder): still one refund.
	if _, err := v.db.Admin.Exec(context.Background(), `DELETE FROM resource_locks`); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := v.svc.Reconcile(context.Background(), j); err != nil {
				if _, _, delayed := job.DelayOf(err); !delayed {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := v.n(`SELECT count(*) FROM paysim_refunds`); n != 1 {
		t.Fatalf("provider refunds: %d, want 1", n)
	}
	if n := v.n(`SELECT count(*) FROM audit_events WHERE action = 'payment.refunded'`); n != 1 {
		t.Fatalf("refund audited %d times", n)
	}
}

// TestChargeDeduplicatedByProviderKey: with a provider that honours the
// idempotency key, a lost answer and a retry charge once.
func TestChargeDeduplicatedByProviderKey(t *testing.T) {
	t.Parallel()
	v := setup(t)
	v.sim.TimeoutAfterChargeNext(1)
	inv := v.upgrade()
	v.work()
	v.work()
	if c := v.n(`SELECT count(*) FROM paysim_charges`); c != 1 {
		t.Fatalf("charges %d, want 1", c)
	}
	if st := v.n(`SELECT count(*) FROM invoices WHERE id = $1 AND status = 'paid'`, inv); st != 1 {
		t.Fatal("invoice not paid")
	}
}

// TestDeclinedChargeFailsInvoice: a decline is permanent.
func TestDeclinedChargeFailsInvoice(t *testing.T) {
	t.Parallel()
	v := setup(t)
	v.sim.FailNext(1)
	inv := v.upgrade()
	v.work()
	if st := v.n(`SELECT count(*) FROM invoices WHERE id = $1 AND status = 'failed'`, inv); st != 1 {
		t.Fatal("invoice not failed")
	}
	if n := v.n(`SELECT count(*) FROM jobs WHERE kind = 'payment.charge' AND state = 'dead'`); n != 1 {
		t.Fatal("declined charge not dead")
	}
}
