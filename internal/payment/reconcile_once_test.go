package payment_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jejakhq/jejak/internal/payment"
)

// TestOneReconcilePerTenantAtATime: while a tenant's reconcile is queued,
// a second request (even sent at the same moment) is refused with
// ErrReconcileActive; once it ran, staff may queue another; another
// tenant is not affected.
func TestOneReconcilePerTenantAtATime(t *testing.T) {
	t.Parallel()
	v := setup(t)
	ctx := context.Background()
	staffID := v.n(`SELECT id FROM users WHERE email = 'support@jejak.test'`)
	other := v.n(`SELECT id FROM tenants WHERE slug = 'toko-bunga-melati'`)

	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = v.svc.EnqueueReconcile(ctx, v.tenant, staffID, "reconcile-once")
		}()
	}
	close(start)
	wg.Wait()
	queued := 0
	for _, err := range errs {
		switch {
		case err == nil:
			queued++
		case !errors.Is(err, payment.ErrReconcileActive):
			t.Fatalf("refusal: %v, want ErrReconcileActive", err)
		}
	}
	if queued != 1 {
		t.Fatalf("%d of 8 concurrent requests queued a reconcile, want 1", queued)
	}
	if n := v.n(`SELECT count(*) FROM jobs WHERE tenant_id = $1 AND kind = 'payment.reconcile'`, v.tenant); n != 1 {
		t.Fatalf("%d reconcile jobs, want 1", n)
	}
	if _, err := v.svc.EnqueueReconcile(ctx, other, staffID, "other"); err != nil {
		t.Fatalf("another tenant's reconcile: %v", err)
	}
	v.work()
	if _, err := v.svc.EnqueueReconcile(ctx, v.tenant, staffID, "again"); err != nil {
		t.Fatalf("after the first ran: %v", err)
	}
}
