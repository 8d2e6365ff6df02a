package audit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
)

// Two Verifiers on one database (two replicas) never walk one tenant's
// log at the same time: while one walks, the other answers "busy" without
// walking; another tenant is not held up; once the first is done the second
// runs.
func TestVerifierOnceAtATimeAcrossReplicas(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tn := f.tenant(t, "melati")
	other := f.tenant(t, "senja")
	if _, err := audit.SeedScale(ctx, f.db.System, []int64{tn, other}, 200, audit.SeedOptions{BatchSize: 200}); err != nil {
		t.Fatal(err)
	}
	f.seal(t)
	var inWalk, maxInWalk atomic.Int64
	entered := make(chan struct{})
	release := make(chan struct{})
	var released sync.Once
	unblock := func() { released.Do(func() { close(release) }) }
	defer unblock() // a failing check must not leave the first walk blocked
	var once sync.Once
	hook := func(block bool) func(int64) {
		return func(tenantID int64) {
			if tenantID != tn {
				return
			}
			n := inWalk.Add(1)
			for m := maxInWalk.Load(); n > m && !maxInWalk.CompareAndSwap(m, n); m = maxInWalk.Load() {
			}
			if block {
				once.Do(func() { close(entered) })
				<-release
			}
			inWalk.Add(-1)
		}
	}
	a, b := audit.NewVerifier(f.db.App), audit.NewVerifier(f.db.App)
	audit.SetVerifierWalking(a, hook(true))
	audit.SetVerifierWalking(b, hook(false))

	type out struct {
		r   audit.VerifyResult
		err error
	}
	first := make(chan out, 1)
	go func() {
		r, err := a.Verify(ctx, tn)
		first <- out{r, err}
	}()
	<-entered // a holds the lock and is about to walk

	_, err := b.Verify(ctx, tn)
	if !errors.Is(err, audit.ErrVerifyBusy) || apperr.CodeOf(err) != apperr.CodeConflict {
		t.Fatalf("second replica while the first walks: err = %v, want ErrVerifyBusy (conflict)", err)
	}
	if b.Runs() != 0 {
		t.Fatalf("second replica walked the chain %d times while the first held it", b.Runs())
	}
	if r, err := b.Verify(ctx, other); err != nil || !r.OK || b.Runs() != 1 {
		t.Fatalf("another tenant on the second replica: %+v %v runs=%d", r, err, b.Runs())
	}

	unblock()
	o := <-first
	if o.err != nil || !o.r.OK || o.r.TreeSize < 1 || a.Runs() != 1 {
		t.Fatalf("first replica: %+v %v runs=%d", o.r, o.err, a.Runs())
	}
	// The lock went with the first replica's transaction: the second runs now.
	if r, err := b.Verify(ctx, tn); err != nil || !r.OK || r.TreeSize != o.r.TreeSize || b.Runs() != 2 {
		t.Fatalf("second replica after the first finished: %+v %v runs=%d", r, err, b.Runs())
	}
	if m := maxInWalk.Load(); m != 1 {
		t.Fatalf("%d chain walks of one tenant at once, want 1", m)
	}
}
