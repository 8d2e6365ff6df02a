package audit_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jejakhq/jejak/internal/audit"
)

// Twenty parallel verifications of one tenant run the log check once;
// asking again is free until the tree grows; another tenant is its own.
func TestVerifierOncePerTenantAndCachedByTree(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	other := f.tenant(t, "senja")
	if _, err := audit.SeedScale(ctx, f.db.System, []int64{tn, other}, 3000, audit.SeedOptions{BatchSize: 1000}); err != nil {
		t.Fatal(err)
	}
	f.seal(t)
	v := audit.NewVerifier(f.db.App)
	var wg sync.WaitGroup
	results := make(chan audit.VerifyResult, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := v.Verify(ctx, tn)
			if err != nil {
				t.Error(err)
			}
			results <- r
		}()
	}
	wg.Wait()
	close(results)
	var head int64
	for r := range results {
		if !r.OK || r.TreeSize < 1000 || (head != 0 && r.TreeSize != head) {
			t.Fatalf("result %+v", r)
		}
		head = r.TreeSize
	}
	if n := v.Runs(); n != 1 {
		t.Fatalf("20 parallel verifications ran the check %d times, want 1", n)
	}
	if _, err := v.Verify(ctx, tn); err != nil || v.Runs() != 1 {
		t.Fatalf("a repeat with the same tree ran again (%d runs, %v)", v.Runs(), err)
	}
	if r, err := v.Verify(ctx, other); err != nil || !r.OK || v.Runs() != 2 {
		t.Fatalf("other tenant: %+v %v runs=%d", r, err, v.Runs())
	}
	f.record(t, audit.Event{TenantID: tn, ActorKind: audit.ActorSystem, Action: "test.more", Entity: "e", EntityID: "1"})
	if _, err := v.Verify(ctx, tn); err != nil || v.Runs() != 2 {
		t.Fatalf("an unsealed event ran the check again (%d runs, %v)", v.Runs(), err)
	}
	f.seal(t)
	if r, err := v.Verify(ctx, tn); err != nil || r.TreeSize != head+1 || v.Runs() != 3 {
		t.Fatalf("after the tree grew: %+v %v runs=%d", r, err, v.Runs())
	}
}
