package audit

import "time"

// SetNewestClock sets the clock the kept newest pages age by.
func (s *Service) SetNewestClock(now func() time.Time) { s.newestPages.now = now }

// NewestMaxAge is how long a kept newest page is served.
func (s *Service) NewestMaxAge() time.Duration { return s.newestPages.maxAge }

// NewestUpdates is how many newest pages were brought up to date from
// what changed rather than read again.
func (s *Service) NewestUpdates() int64 { return s.newestPages.updates.Load() }

// NewestChangedMax is how many changes a kept newest page is brought up to
// date through.
const NewestChangedMax = newestChangedMax
