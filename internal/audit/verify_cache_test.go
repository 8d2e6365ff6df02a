package audit_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jejakhq/jejak/internal/audit"
)

// Twenty parallel verifications of one tenant run the chain check once;
// asking again is free until the head moves; another tenant is its own.
func TestVerifierOncePerTenantAndCachedByHead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	other := f.tenant(t, "senja")
	if _, err := audit.SeedScale(ctx, f.db.System, []int64{tn, other}, 3000, audit.SeedOptions{BatchSize: 1000}); err != nil {
		t.Fatal(err)
	}
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
		if !r.OK || r.HeadSeq < 1000 || (head != 0 && r.HeadSeq != head) {
			t.Fatalf("result %+v", r)
		}
		head = r.HeadSeq
	}
	if n := v.Runs(); n != 1 {
		t.Fatalf("20 parallel verifications ran the check %d times, want 1", n)
	}
	if _, err := v.Verify(ctx, tn); err != nil || v.Runs() != 1 {
		t.Fatalf("a repeat with the same head ran again (%d runs, %v)", v.Runs(), err)
	}
	if r, err := v.Verify(ctx, other); err != nil || !r.OK || v.Runs() != 2 {
		t.Fatalf("other tenant: %+v %v runs=%d", r, err, v.Runs())
	}
	f.record(t, audit.Event{TenantID: tn, ActorKind: audit.ActorSystem, Action: "test.more", Entity: "e", EntityID: "1"})
	if r, err := v.Verify(ctx, tn); err != nil || r.HeadSeq != head+1 || v.Runs() != 3 {
		t.Fatalf("after the head moved: %+v %v runs=%d", r, err, v.Runs())
	}
}
