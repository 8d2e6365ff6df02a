// Package job is Jejak's PostgreSQL-backed job engine: transactional
// enqueue, batch claim with FOR UPDATE SKIP LOCKED, tenant fairness,
// retries with backoff, dead letters, leases and rescue, and a goroutine
// worker pool. Every reading of time comes from an injected clock.Clock.
//
// This file is the engine's public contract; handlers, the staff console
// (internal/console) and the benchmark build against it.
package job

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jejakhq/jejak/internal/apperr"
)

// State is a job's lifecycle state; a CHECK constraint admits only these.
type State string

// The job states. Pending includes jobs scheduled in the future; dead is
// a dead letter (attempts exhausted or a permanent or policy failure),
// kept until an operator retries or discards it.
const (
	StatePending   State = "pending"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateDead      State = "dead"
	StateCancelled State = "cancelled"
)

// States lists every state in lifecycle order, for filters and tabs.
var States = []State{StatePending, StateRunning, StateSucceeded, StateDead, StateCancelled}

// ValidState reports whether s names a job state.
func ValidState(s State) bool {
	for _, st := range States {
		if s == st {
			return true
		}
	}
	return false
}

// MaxKindLen bounds a kind's name, and so every kind filter.
const MaxKindLen = 100

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
	PayloadVersion int       // the payload's version, stamped at enqueue
	// ReplayedBy is the staff member whose retry put this dead letter back
	// in the queue (nil when it never died or was not retried): the engine
	// then records how the replay ends in the tenant's trail.
	ReplayedBy *int64

	// payloadIntact is the database's verdict on PayloadHash, read with the
	// payload (the key never leaves the database).
	payloadIntact bool
	// claimedAt is this process's monotonic reading taken just before the
	// claim: AttemptedAt plus the time elapsed since then is "now" on the
	// database's clock without asking it.
	claimedAt time.Time
}

// VerifyPayload reports whether the payload is the one signed at enqueue.
// The MAC is keyed with a server secret only the database owner
// can read, so it is checked by the database as the job is claimed or
// read; the engine refuses to run a job whose payload fails it.
func (j *Job) VerifyPayload() bool { return j.payloadIntact }

// KindOptions configures one registered kind.
type KindOptions struct {
	MaxAttempts int           // 0 = DefaultMaxAttempts
	Timeout     time.Duration // 0 = no per-attempt deadline beyond shutdown
	Sensitive   bool          // sensitive kinds record every lifecycle stage in the tenant's audit trail
	// PayloadVersion is the payload version this code writes (0 = 1);
	// MinPayloadVersion the oldest it still reads (0 = 1). A job outside
	// [Min, PayloadVersion] is left for a replica that knows it (delayed).
	PayloadVersion    int
	MinPayloadVersion int
}

// Enqueued is the outcome of one enqueue.
type Enqueued struct {
	ID int64
	// Existing is true when the idempotency key matched a job already
	// enqueued; nothing new was written and ID names that job.
	Existing bool
}

// AttemptError is one failed attempt in a job's history (the jobs.errors
// column keeps every one, so a dead letter shows why each attempt failed).
type AttemptError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Worker  string    `json:"worker"`
	Class   Class     `json:"class"`
	Error   string    `json:"error"`
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
	// PayloadVersion stamps the payload's version; 0 = the kind's
	// declared KindOptions.PayloadVersion (1 when undeclared).
	PayloadVersion int
	// DependsOn makes the job wait until that job (same tenant) has
	// succeeded; it is cancelled with a reason if that job is dead or
	// cancelled.
	DependsOn *int64
}

// Errors returned by the engine, with their application error codes.
var (
	// ErrNotHeld: complete/fail of a job the caller does not hold. Never a
	// silent no-op: a worker that lost its lease must not overwrite the
	// attempt that replaced it.
	ErrNotHeld = apperr.Conflict("job is not held by this worker")
	// ErrNotFound: no such job (for this tenant).
	ErrNotFound = apperr.NotFound("job not found")
	// ErrInvalidPayload: the payload is not valid JSON; nothing is written.
	ErrInvalidPayload = &apperr.Error{Code: apperr.CodeInvalid, Message: "job payload must be valid JSON"}
	// ErrInvalidJob: a required field (tenant, kind) is missing or out of range.
	ErrInvalidJob = &apperr.Error{Code: apperr.CodeInvalid, Message: "invalid job"}
)

// Failure causes the engine records on a job itself (they end in the job's
// last_error, not in a caller's hands).
var (
	// ErrExpired: the job passed its expires_at before it ran; it is
	// dead-lettered as a policy failure, since running it late could act
	// on stale authority.
	ErrExpired = errors.New("job expired before it ran")
	// ErrPayloadTampered: the payload no longer matches the MAC signed at
	// enqueue (the row was edited); the job is refused as a policy failure.
	ErrPayloadTampered = errors.New("job payload does not match its signed hash")
	// ErrUnknownKind: no handler is registered for the job's kind; such a
	// job fails permanently.
	ErrUnknownKind = errors.New("no handler registered for job kind")
)

// Class is how a failure is treated.
type Class string

// Failure classes.
const (
	ClassTransient Class = "transient" // retried with backoff, dead after max attempts
	ClassPermanent Class = "permanent" // dead now
	ClassPolicy    Class = "policy"    // dead now, flagged for review (policy violation, expired, revoked)
)

// Classes lists every failure class, for filters.
var Classes = []Class{ClassTransient, ClassPermanent, ClassPolicy}

// ValidClass reports whether c names a failure class.
func ValidClass(c Class) bool {
	for _, k := range Classes {
		if c == k {
			return true
		}
	}
	return false
}

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
