package audit

import (
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
