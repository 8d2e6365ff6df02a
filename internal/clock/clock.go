// Package clock is Jejak's single source of "now".
//
// Domain code never calls time.Now: it asks a Clock. The production clock
// answers nil, which queries turn into the database's now() via
// coalesce(sqlc.narg('now'), now()), so replicas with skewed clocks agree on
// one time source. Tests use a Frozen clock and move it by hand.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock reports the current time, or nil to mean "ask the database".
type Clock interface {
	Now() *time.Time
}

// Database is the production clock: it defers every reading to PostgreSQL.
type Database struct{}

// Now returns nil so that SQL falls back to now().
func (Database) Now() *time.Time { return nil }

// Frozen is a clock that only moves when told to.
type Frozen struct {
	mu sync.Mutex
	t  time.Time
}

// NewFrozen returns a clock stopped at t.
func NewFrozen(t time.Time) *Frozen { return &Frozen{t: t} }

// Now returns the frozen instant.
func (f *Frozen) Now() *time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.t
	return &t
}

// Set moves the clock to t.
func (f *Frozen) Set(t time.Time) {
	f.mu.Lock()
	f.t = t
	f.mu.Unlock()
}

// Advance moves the clock forward by d.
func (f *Frozen) Advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// Sleep waits d, or until ctx ends (its error then); a d of zero or less
// returns nil at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
