package audit

import (
	"sync"
	"time"

	"github.com/jejakhq/jejak/internal/apperr"
)

// ExportsPerUser is how many exports one user may run at once, across
// their sessions and tenants. An export streams for as long as the client
// reads; each one costs a batch query per 1,000 events, so twenty at once
// from one member slowed every tenant's pages.
const ExportsPerUser = 2

// exportRetryAfter is what a refused export is told to wait: exports have
// no known end, so a short, fixed hint.
const exportRetryAfter = 10 * time.Second

// ErrTooManyExports refuses an export past ExportsPerUser.
var ErrTooManyExports = apperr.TooMany("You already have the most exports running at once; wait for one to finish.", exportRetryAfter)

// exportSlots counts the exports each user has running in this process.
// It is per process, not shared by replicas: a user whose requests are
// spread over N replicas may run up to N × ExportsPerUser.
type exportSlots struct {
	mu      sync.Mutex
	running map[int64]int
}

// take reserves one of userID's slots, returning its release, or false
// when all are in use.
func (s *exportSlots) take(userID int64) (func(), bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[userID] >= ExportsPerUser {
		return nil, false
	}
	if s.running == nil {
		s.running = map[int64]int{}
	}
	s.running[userID]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.running[userID]--; s.running[userID] == 0 {
				delete(s.running, userID)
			}
		})
	}, true
}
