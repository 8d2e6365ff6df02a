package web

import (
	"sync"
	"time"
)

// throttle limits failed sign-ins per key (e-mail and client address) in a
// fixed window. It lives in memory: each replica throttles on its own,
// which bounds guessing per replica; a shared store would bound it globally.
type throttle struct {
	mu     sync.Mutex
	max    int
	window time.Duration
	now    func() time.Time
	fails  map[string]*window
}

type window struct {
	start time.Time
	n     int
}

func newThrottle(max int, per time.Duration) *throttle {
	return &throttle{max: max, window: per, now: time.Now, fails: map[string]*window{}}
}

// blocked reports whether key has used up its failures, and for how long.
func (t *throttle) blocked(key string) (bool, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.fails[key]
	if !ok {
		return false, 0
	}
	left := t.window - t.now().Sub(w.start)
	if left <= 0 {
		delete(t.fails, key)
		return false, 0
	}
	return w.n >= t.max, left
}

// fail counts one failure for key.
func (t *throttle) fail(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if len(t.fails) > 100000 { // bound memory under a spray of keys
		for k, w := range t.fails {
			if now.Sub(w.start) > t.window {
				delete(t.fails, k)
			}
		}
	}
	w, ok := t.fails[key]
	if !ok || now.Sub(w.start) > t.window {
		t.fails[key] = &window{start: now, n: 1}
		return
	}
	w.n++
}

// reset forgets key's failures after a successful sign-in.
func (t *throttle) reset(key string) {
	t.mu.Lock()
	delete(t.fails, key)
	t.mu.Unlock()
}
