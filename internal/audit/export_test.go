package audit

import "time"

// SetNewestClock sets the clock the kept newest pages age by.
func (s *Service) SetNewestClock(now func() time.Time) { s.newestPages.now = now }

// NewestMaxAge is how long a kept newest page is served.
func (s *Service) NewestMaxAge() time.Duration { return s.newestPages.maxAge }
