package inflight_test

import (
	"sync"
	"testing"

	"github.com/jejakhq/jejak/internal/inflight"
)

// TestCounterHoldsItsLimitPerKey: concurrent takers of one key never get
// past the limit, other keys are not affected, and a release (even called
// twice) frees exactly one place.
func TestCounterHoldsItsLimitPerKey(t *testing.T) {
	t.Parallel()
	var c inflight.Counter
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []func()
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if release, ok := c.Take(1, 3); ok {
				mu.Lock()
				got = append(got, release)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != 3 || c.InFlight(1) != 3 {
		t.Fatalf("%d taken, %d in flight; want 3", len(got), c.InFlight(1))
	}
	if _, ok := c.Take(2, 3); !ok {
		t.Fatal("another key was refused")
	}
	got[0]()
	got[0]()
	if c.InFlight(1) != 2 {
		t.Fatalf("after one release called twice: %d in flight, want 2", c.InFlight(1))
	}
	if _, ok := c.Take(1, 3); !ok {
		t.Fatal("the freed place was not given out")
	}
	if _, ok := c.Take(1, 3); ok {
		t.Fatal("past the limit again")
	}
}
