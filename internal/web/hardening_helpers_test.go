package web_test

import (
	"time"
)

// eventually polls a COUNT query until it returns want, failing after a
// deadline (for work done just after an answer was sent).
func (f *fixture) eventually(want int, sql string, args ...any) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := f.count(sql, args...)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%q = %d, want %d", sql, n, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
