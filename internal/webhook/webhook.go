// Package webhook delivers a tenant's domain events to the HTTP endpoints
// its owner registered, signed the Standard Webhooks way: a JetStream
// consumer fans each event out as one webhook.deliver job per matching
// endpoint (idempotent per event and endpoint), and the job POSTs it
// through an SSRF-guarded client, records every attempt and retries on the
// established providers' schedule. Owners manage endpoints through Service;
// every change is in the tenant's audit trail.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/clip"
	"github.com/jejakhq/jejak/internal/outbox"
)

// Kind is the job kind that performs one delivery attempt.
const Kind = "webhook.deliver"

// SecretPrefix starts every signing secret.
const SecretPrefix = "whsec_"

// secretBytes is the signing key's length (Standard Webhooks asks for
// 24 to 64 bytes).
const secretBytes = 32

// RotationOverlap is how long the previous secret keeps signing after a
// rotation.
const RotationOverlap = 24 * time.Hour

// Timeout bounds one delivery attempt.
const Timeout = 15 * time.Second

// MaxResponse is how much of a receiver's answer an attempt keeps.
const MaxResponse = 1024

// Schedule is the delay before each attempt: immediately, then 5 s, 5 min,
// 30 min, 2 h, 5 h, 10 h, 10 h (the established providers' schedule).
var Schedule = []time.Duration{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// MaxAttempts is how many attempts a delivery gets.
var MaxAttempts = len(Schedule)

// Delivery states.
const (
	StatePending   = "pending"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
)

// Errors of this package.
var (
	ErrNotFound = apperr.NotFound("webhook endpoint not found")
	ErrReadOnly = apperr.Forbidden("only owners and admins manage webhooks")
)

// Endpoint is a tenant's webhook endpoint (without its secret).
type Endpoint struct {
	ID             int64
	TenantID       int64
	URL            string
	Events         []string // "*" = every event
	Enabled        bool
	DisabledReason string
	// PreviousUntil is when the previous secret stops signing (nil = never
	// rotated).
	PreviousUntil *time.Time
	CreatedAt     time.Time
	// ConsecutiveFailures counts failed attempts since the last success;
	// FailingSince is the first of them (nil when the last one succeeded).
	ConsecutiveFailures int
	FailingSince        *time.Time
	// BreakerOpenUntil: while in the future no attempt is made.
	BreakerOpenUntil *time.Time
	// RateLimit is the owner's cap in messages per second (0 = none).
	RateLimit int
	// Ordered endpoints get one aggregate's events one at a time, in order.
	Ordered bool
	// Health is filled by listings: the breaker's state and the last 24
	// hours' attempt outcomes.
	Health Health
}

// Breaker states, as shown to owners.
const (
	BreakerClosed  = "closed"  // delivering normally
	BreakerFailing = "failing" // failing, below the threshold: one attempt at a time
	BreakerOpen    = "open"    // holding deliveries until BreakerOpenUntil, then a probe
)

// Health is an endpoint's state for its owner.
type Health struct {
	Breaker string
	// Succeeded and Failed count attempts over the last 24 hours.
	Succeeded, Failed int64
	// Held counts the deliveries held behind the open breaker, up to
	// HeldCountCap (read for one endpoint's page, not for the list).
	Held int64
}

// HeldCountCap is the most held deliveries an endpoint's page counts.
const HeldCountCap = 10000

// SuccessRate is the share of the last 24 hours' attempts that succeeded,
// in percent; ok is false when there were none.
func (h Health) SuccessRate() (pct int, ok bool) {
	n := h.Succeeded + h.Failed
	if n == 0 {
		return 0, false
	}
	return int(h.Succeeded * 100 / n), true
}

// BreakerState is the endpoint's breaker state at now.
func (e Endpoint) BreakerState(now time.Time) string {
	switch {
	case e.BreakerOpenUntil != nil && e.BreakerOpenUntil.After(now):
		return BreakerOpen
	case e.BreakerOpenUntil != nil, e.ConsecutiveFailures > 0:
		return BreakerFailing
	}
	return BreakerClosed
}

// Delivery is one event sent (or being sent) to one endpoint.
type Delivery struct {
	ID          int64
	EndpointID  int64
	EventID     string
	EventType   string
	State       string
	Attempts    int
	NextAttempt *time.Time
	// NextIn is how long until NextAttempt, for pending deliveries shown
	// to owners.
	NextIn time.Duration
	// Held: pending with no job while its endpoint's breaker is open
	// (another delivery waits it out); released when the breaker closes.
	Held       bool
	LastStatus int // 0 = no HTTP answer
	LastError  string
	CreatedAt  time.Time
	Log        []Attempt
}

// Attempt is one POST of a delivery.
type Attempt struct {
	N          int
	At         time.Time
	StatusCode int // 0 = no HTTP answer
	Latency    time.Duration
	Response   string // first MaxResponse bytes
	Error      string
}

// NewSecret returns a fresh signing secret: "whsec_" + base64 of 32
// random bytes.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// Sign returns the Standard Webhooks signature entry "v1,<base64>" of
// msgID.timestamp.body under secret ("whsec_…").
func Sign(secret, msgID string, timestamp int64, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return "", fmt.Errorf("decode webhook secret: %w", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msgID + "." + strconv.FormatInt(timestamp, 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// Verify checks a webhook-signature header (space-separated entries)
// against secret, as a receiver does. It does not check the timestamp's
// age; receivers should also refuse timestamps older than 5 minutes.
func Verify(secret, msgID string, timestamp int64, body []byte, header string) bool {
	want, err := Sign(secret, msgID, timestamp, body)
	if err != nil {
		return false
	}
	for _, s := range strings.Fields(header) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return true
		}
	}
	return false
}

// ParseURL validates an endpoint URL: absolute http(s), a host, no
// credentials. Where it may connect is decided at dial time (Guard).
func ParseURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > 2000 || !utf8.ValidString(raw) || strings.ContainsAny(raw, "\x00\r\n\t ") {
		return "", apperr.Invalid("url", "enter an http:// or https:// URL of at most 2000 characters")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return "", apperr.Invalid("url", "enter an absolute http:// or https:// URL")
	}
	if u.User != nil {
		return "", apperr.Invalid("url", "the URL must not contain credentials")
	}
	u.Fragment = ""
	return u.String(), nil
}

// ParseEvents reads the events field: "*" or a comma-separated list of
// event types from the Catalog. It returns a sorted, de-duplicated list.
func ParseEvents(raw string) ([]string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, apperr.Invalid("events", `enter * or a comma-separated list of event types, e.g. project.created,project.deleted`)
	}
	seen := map[string]bool{}
	for _, p := range strings.Split(raw, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if p != "*" && !outbox.ValidType(p) {
			return nil, apperr.Invalid("events", fmt.Sprintf("%q is not an event type (lower-case words separated by dots)", clip.Bytes(p, 60)))
		}
		if p != "*" && !KnownEventType(p) {
			return nil, apperr.Invalid("events", fmt.Sprintf("%q is not an event type Jejak sends: choose from the catalog below", clip.Bytes(p, 60)))
		}
		seen[p] = true
	}
	if len(seen) == 0 || len(seen) > 50 {
		return nil, apperr.Invalid("events", "enter between 1 and 50 event types")
	}
	if seen["*"] {
		return []string{"*"}, nil
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// retryDelay is the wait before attempt n+1 after attempt n failed, at
// least what the receiver asked for with Retry-After.
func retryDelay(n int, retryAfter time.Duration) time.Duration {
	d := Schedule[min(n, len(Schedule)-1)]
	return max(d, min(retryAfter, 24*time.Hour))
}

var errGone = errors.New("receiver answered 410 Gone: endpoint disabled")
