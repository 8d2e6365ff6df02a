// Package job is Jejak's PostgreSQL-backed job engine: transactional
// enqueue, batch claim with FOR UPDATE SKIP LOCKED, tenant fairness,
// retries with backoff, dead letters, leases and rescue, and a goroutine
// worker pool. Every reading of time comes from an injected clock.Clock.
//
// This file is the engine's public contract; handlers and the benchmark
// build against it.
package job

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// State is a job's lifecycle state; a CHECK constraint admits only these.
type State string

// The job states (SPEC J3). Pending includes jobs scheduled in the future.
const (
	StatePending   State = "pending"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateDead      State = "dead"
	StateCancelled State = "cancelled"
)

// Job is one claimed job as a handler sees it.
type Job struct {
	ID             int64
	TenantID       int64
	Kind           string
	Queue          string
	Priority       int16
	Payload        json.RawMessage
	Attempt        int // 1 on the first run
	MaxAttempts    int
	TraceID        string
	RequestedBy    *int64 // user id of the requester, nil for system jobs
	RequestedAt    time.Time
	ExpiresAt      *time.Time
	IdempotencyKey string
	PayloadHash    []byte // HMAC-SHA256 of the job and its payload, signed by the database at enqueue
	WorkerID       string
	AvailableAt    time.Time
	CreatedAt      time.Time
	AttemptedAt    time.Time // when this attempt was claimed (engine clock)
	LeaseExpiresAt time.Time // when the lease ends unless heartbeats extend it

	// payloadIntact is the database's verdict on PayloadHash, read with the
	// payload (the key never leaves the database).
	payloadIntact bool
	// claimedAt is this process's monotonic reading taken just before the
	// claim: AttemptedAt plus the time elapsed since then is "now" on the
	// database's clock without asking it.
	claimedAt time.Time
}

// VerifyPayload reports whether the payload is the one signed at enqueue
// (SPEC S3). The MAC is keyed with a server secret only the database owner
// can read, so it is checked by the database as the job is claimed or
// read; the engine refuses to run a job whose payload fails it.
func (j *Job) VerifyPayload() bool { return j.payloadIntact }

// KindOptions configures one registered kind.
type KindOptions struct {
	MaxAttempts int           // 0 = 3 (seed 000's MAX_ATTEMPTS)
	Timeout     time.Duration // 0 = no per-attempt deadline beyond shutdown
	Sensitive   bool          // sensitive kinds record every lifecycle stage in the audit trail (SPEC A6)
}

// Enqueued is the outcome of one enqueue.
type Enqueued struct {
	ID int64
	// Existing is true when the idempotency key matched a job already
	// enqueued; nothing new was written and ID names that job.
	Existing bool
}

// DeadLetter is a job that exhausted its attempts or failed permanently.
type DeadLetter struct {
	ID          int64
	TenantID    int64
	Kind        string
	Queue       string
	Payload     json.RawMessage
	Attempts    int
	MaxAttempts int
	LastError   string
	Class       Class
	Flagged     bool
	FinishedAt  time.Time
	TraceID     string
}

// AttemptError is one failed attempt in a job's history (SPEC J6).
type AttemptError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Worker  string    `json:"worker"`
	Class   Class     `json:"class"`
	Error   string    `json:"error"`
}

// Record is the full stored state of a job, for tests and the dashboard.
type Record struct {
	Job
	State      State
	FinishedAt *time.Time
	LastError  string
	Class      Class
	Flagged    bool
	Errors     []AttemptError
}

// Handler does the work of one kind. Returning nil completes the job; any
// other error fails it as transient (retried with backoff) unless wrapped
// with Permanent or Policy.
type Handler func(ctx context.Context, j *Job) error

// EnqueueParams describes a job to enqueue. Zero values take defaults.
type EnqueueParams struct {
	TenantID       int64
	Kind           string
	Payload        json.RawMessage // must be valid JSON
	Queue          string          // "" = "default"
	Priority       int16           // lower runs first; 0 = default
	AvailableAt    *time.Time      // nil = now (clock)
	MaxAttempts    int             // 0 = the kind's default (3)
	TraceID        string          // "" = generated
	RequestedBy    *int64
	ExpiresAt      *time.Time
	IdempotencyKey string // unique per (tenant, kind) when set
}

// Errors returned by the engine.
var (
	// ErrNotHeld: complete/fail of a job the caller does not hold (seed
	// 000's RuntimeException). Never a silent no-op.
	ErrNotHeld = errors.New("job is not held by this worker")
	// ErrNotFound: no such job (for this tenant).
	ErrNotFound = errors.New("job not found")
	// ErrInvalidPayload: the payload is not valid JSON; nothing is written.
	ErrInvalidPayload = errors.New("job payload must be valid JSON")
	// ErrInvalidJob: a required field (tenant, kind) is missing or out of range.
	ErrInvalidJob = errors.New("invalid job")
	// ErrExpired: the job passed its expires_at before it ran; it is
	// dead-lettered as a policy failure (SPEC S3).
	ErrExpired = errors.New("job expired before it ran")
	// ErrPayloadTampered: the payload no longer matches the MAC signed at
	// enqueue (the row was edited); the job is refused as a policy failure.
	ErrPayloadTampered = errors.New("job payload does not match its signed hash")
	// ErrUnknownKind: no handler is registered for the job's kind; such a
	// job fails permanently.
	ErrUnknownKind = errors.New("no handler registered for job kind")
)

// Class is how a failure is treated (SPEC J7).
type Class string

// Failure classes.
const (
	ClassTransient Class = "transient" // retried with backoff, dead after max attempts
	ClassPermanent Class = "permanent" // dead now
	ClassPolicy    Class = "policy"    // dead now, flagged for review (policy violation, expired, revoked)
)

type classified struct {
	class Class
	err   error
}

func (c *classified) Error() string { return c.err.Error() }
func (c *classified) Unwrap() error { return c.err }

// Permanent marks err so the job is dead-lettered at once.
func Permanent(err error) error { return &classified{ClassPermanent, err} }

// Policy marks err as a policy failure (expired, unauthorised, tampered):
// dead at once and flagged for review.
func Policy(err error) error { return &classified{ClassPolicy, err} }

// ClassOf reports the class of a handler error.
func ClassOf(err error) Class {
	var c *classified
	if errors.As(err, &c) {
		return c.class
	}
	return ClassTransient
}
