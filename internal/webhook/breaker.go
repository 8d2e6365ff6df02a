package webhook

import (
	"context"
	"fmt"
	"time"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
)

// Breaker configures the per-endpoint circuit breaker: after Failures
// failed attempts in a row the endpoint's deliveries are held (not
// attempted, their attempts not counted) for Cooldown, doubling with each
// further failure up to MaxCooldown; then one probe goes out, and its
// success closes the breaker. An endpoint whose attempts have all failed
// for DisableAfter is disabled.
type Breaker struct {
	Failures     int
	Cooldown     time.Duration
	MaxCooldown  time.Duration
	DisableAfter time.Duration
}

// DefaultBreaker is the breaker unless configured otherwise: the
// established providers disable an endpoint after five days of failures.
var DefaultBreaker = Breaker{Failures: 5, Cooldown: 30 * time.Second, MaxCooldown: time.Hour, DisableAfter: 5 * 24 * time.Hour}

func (b Breaker) withDefaults() Breaker {
	if b.Failures <= 0 {
		b.Failures = DefaultBreaker.Failures
	}
	if b.Cooldown <= 0 {
		b.Cooldown = DefaultBreaker.Cooldown
	}
	if b.MaxCooldown < b.Cooldown {
		b.MaxCooldown = max(DefaultBreaker.MaxCooldown, b.Cooldown)
	}
	if b.DisableAfter <= 0 {
		b.DisableAfter = DefaultBreaker.DisableAfter
	}
	return b
}

// probeSlack is how long past Timeout a probe keeps the breaker shut to
// other deliveries: its outcome reopens or closes it before then.
const probeSlack = 15 * time.Second

// OrderedWait is how long a delivery of an ordered endpoint waits for an
// earlier one of its aggregate before it is looked at again.
const OrderedWait = time.Second

// RateWait is how long a delivery past its endpoint's rate waits: the
// limit counts one-second windows.
const RateWait = time.Second

// MaxRateLimit is the highest per-endpoint rate an owner may set.
const MaxRateLimit = 1000

// Why an endpoint was disabled by Jejak rather than its owner (shown to
// the owner, through the catalogs).
const (
	ReasonGone    = "the receiver answered 410 Gone"
	ReasonFailing = "every attempt failed for days: disabled automatically"
	ReasonOwner   = "disabled by the owner"
)

// EventEndpointDisabled is the event published when Jejak disables an
// endpoint, so the tenant's other endpoints hear of it.
const EventEndpointDisabled = "webhook.endpoint.disabled"

// HoursKept is how long the hourly attempt tallies behind the 24 h success
// rate are kept.
const HoursKept = 48 * time.Hour

// PruneHours deletes the attempt tallies older than HoursKept through the
// cross-tenant pool, and returns how many rows went.
func PruneHours(ctx context.Context, system database.Querier, clk clock.Clock) (int64, error) {
	if clk == nil {
		clk = clock.Database{}
	}
	now, err := dbNow(ctx, system, clk)
	if err != nil {
		return 0, err
	}
	n, err := newStore(system).pruneHours(ctx, now.Add(-HoursKept))
	if err != nil {
		return 0, fmt.Errorf("prune webhook attempt tallies: %w", err)
	}
	return n, nil
}
