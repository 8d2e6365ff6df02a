// Package inflight counts work in flight per key (a user, a tenant) in one
// process, so a caller can refuse or put back work past a per-key limit.
package inflight

import "sync"

// Counter is a set of per-key counts; the zero value is ready to use and
// is safe for concurrent use.
type Counter struct {
	mu    sync.Mutex
	count map[int64]int
}

// Take counts one more for key if key has fewer than limit in flight, and
// returns the release (safe to call more than once); ok is false, and
// nothing is counted, when key is at its limit.
func (c *Counter) Take(key int64, limit int) (release func(), ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.count[key] >= limit {
		return nil, false
	}
	if c.count == nil {
		c.count = map[int64]int{}
	}
	c.count[key]++
	var once sync.Once
	return func() { once.Do(func() { c.give(key) }) }, true
}

func (c *Counter) give(key int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.count[key]--; c.count[key] <= 0 {
		delete(c.count, key)
	}
}

// InFlight is key's count now.
func (c *Counter) InFlight(key int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count[key]
}
