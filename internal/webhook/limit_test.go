package webhook_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/webhook"
)

// TestEndpointLimitHoldsUnderConcurrentCreations: a tenant never gets past
// its endpoint limit, however many creations race; the refused ones get a
// validation error on the URL field and change nothing.
func TestEndpointLimitHoldsUnderConcurrentCreations(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	v.svc.LimitEndpoints(3)
	const tries = 12
	var wg sync.WaitGroup
	errs := make(chan error, tries)
	start := make(chan struct{})
	for i := 0; i < tries; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := v.svc.Create(ctx, v.tenant, v.owner, fmt.Sprintf("https://hooks.example/%d", i), "*")
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	created, refused := 0, 0
	for err := range errs {
		switch {
		case err == nil:
			created++
		case apperr.CodeOf(err) == apperr.CodeInvalid && apperr.FieldsOf(err)["url"] != "":
			refused++
		default:
			t.Fatalf("creation: %v", err)
		}
	}
	if created != 3 || refused != tries-3 {
		t.Fatalf("%d created, %d refused; want 3 and %d", created, refused, tries-3)
	}
	if n := v.count(t, "SELECT count(*) FROM webhook_endpoints"); n != 3 {
		t.Fatalf("%d endpoints stored, want 3", n)
	}
	if n := v.count(t, "SELECT count(*) FROM audit_events WHERE action = 'webhook.endpoint.create'"); n != 3 {
		t.Fatalf("%d creations in the trail, want 3", n)
	}
}

// TestEndpointListPagesEveryEndpoint: the list is a keyset of pages that
// together hold every endpoint once, newest first.
func TestEndpointListPagesEveryEndpoint(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	v.svc.LimitEndpoints(100)
	const n = 57
	for i := 0; i < n; i++ {
		if _, err := v.svc.Create(ctx, v.tenant, v.owner, fmt.Sprintf("https://hooks.example/%d", i), "*"); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int64]bool{}
	last := int64(1 << 62)
	var before int64
	pages := 0
	for {
		page, err := v.svc.Endpoints(ctx, v.tenant, v.owner, before)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, ep := range page.Rows {
			if seen[ep.ID] || ep.ID >= last {
				t.Fatalf("endpoint %d repeated or out of order (after %d)", ep.ID, last)
			}
			seen[ep.ID], last = true, ep.ID
		}
		if page.Next == 0 {
			break
		}
		before = page.Next
	}
	if len(seen) != n || pages != 2 {
		t.Fatalf("%d endpoints over %d pages, want %d over 2", len(seen), pages, n)
	}
}
