// Package testwait waits in tests for a condition that other goroutines or
// processes make true, by polling it with a deadline (never a bare sleep
// that hopes the work is done).
package testwait

import (
	"sync"
	"testing"
	"time"
)

// Default is the deadline of For: long enough for a loaded machine, short
// enough that a condition that never comes fails the test soon.
const Default = 10 * time.Second

// maxGap is the longest pause between two polls.
const maxGap = 40 * time.Millisecond

// For polls cond until it holds, failing t with what after Default.
// The first polls come 5 ms apart and the gaps grow by half up to 40 ms:
// a condition that comes soon is seen soon, and one that takes seconds
// (an engine draining thousands of jobs) is not asked for hundreds of
// times a second, which on a shared server costs every test beside it
// (most conditions are a query, some read every goroutine's stack).
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Default, what, cond)
}

// Within is For with deadline d.
func Within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	gap := 5 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(gap) // polling with a deadline
		gap = min(gap*3/2, maxGap)
	}
}

// Together runs f(0) … f(n-1) in goroutines released at one moment, as
// replicas started together race, and returns when all have returned.
func Together(n int, f func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}
