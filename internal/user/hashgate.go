package user

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"time"
)

// ErrBusy means every password-hashing slot stayed taken for the whole
// wait: the caller should answer "try again shortly" rather than queue.
var ErrBusy = errors.New("password hashing is saturated")

// HashGate bounds how many argon2id hashes run at once. Each hash allocates
// its full memory cost (64 MiB with the default parameters), so without a
// bound a burst of sign-ins grows the process by that much per request.
type HashGate struct {
	slots chan struct{}
	wait  time.Duration
	inUse atomic.Int64
	peak  atomic.Int64
	total atomic.Int64
}

// NewHashGate admits n hashes at once (n < 1 = runtime.NumCPU(), since a
// hash is CPU-bound and more in parallel only adds memory); a caller waits
// at most wait for a slot.
func NewHashGate(n int, wait time.Duration) *HashGate {
	if n < 1 {
		n = runtime.NumCPU()
	}
	return &HashGate{slots: make(chan struct{}, n), wait: wait}
}

// Do runs fn holding a slot, or returns ErrBusy when none freed in time.
func (g *HashGate) Do(ctx context.Context, fn func()) error {
	select {
	case g.slots <- struct{}{}:
	default:
		t := time.NewTimer(g.wait)
		defer t.Stop()
		select {
		case g.slots <- struct{}{}:
		case <-t.C:
			return ErrBusy
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	n := g.inUse.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	g.total.Add(1)
	defer func() {
		g.inUse.Add(-1)
		<-g.slots
	}()
	fn()
	return nil
}

// Cap is the number of hashes allowed at once.
func (g *HashGate) Cap() int { return cap(g.slots) }

// Peak is the most hashes that ever ran at once.
func (g *HashGate) Peak() int64 { return g.peak.Load() }

// Total is the number of hashes run so far.
func (g *HashGate) Total() int64 { return g.total.Load() }
