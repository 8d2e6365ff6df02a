// Package testwait waits in tests for a condition that other goroutines or
// processes make true, by polling it with a deadline (never a bare sleep
// that hopes the work is done).
package testwait

import (
	"testing"
	"time"
)

// Default is the deadline of For: long enough for a loaded machine, short
// enough that a condition that never comes fails the test soon.
const Default = 10 * time.Second

// For polls cond every 5 ms until it holds, failing t with what after
// Default.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Default, what, cond)
}

// Within is For with deadline d.
func Within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}
