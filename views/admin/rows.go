package admin

import (
	"time"

	"github.com/jejakhq/jejak/views/components"
)

// The staff pages' own rows: plain values the handlers fill from the
// domain, so the views depend on no domain package.

// Tenant names a tenant on the staff pages.
type Tenant struct {
	ID   int64
	Slug string
	Name string
}

// Attempt is one failed attempt of a job.
type Attempt struct {
	Attempt int
	At      time.Time
	Worker  string
	Class   string
	Error   string
}

// JobRow is one job in a staff list (jobs, dead letters, a trace's jobs).
type JobRow struct {
	ID          int64
	TenantID    int64
	Kind        string
	Queue       string
	State       string
	Attempt     int
	MaxAttempts int
	CreatedAt   time.Time
	FinishedAt  *time.Time
	LastError   string
	Class       string
	Flagged     bool
	TraceID     string
	// Errors is the attempt history, filled on the trace page only.
	Errors []Attempt
}

// Dead reports whether the job is a dead letter (retry and discard apply).
func (r JobRow) Dead() bool { return r.State == "dead" }

// JobDetail is one job's metadata for its page.
type JobDetail struct {
	JobRow
	Priority       int16
	AvailableAt    time.Time
	RequestedAt    time.Time
	AttemptedAt    time.Time
	LeaseExpiresAt time.Time
	ExpiresAt      *time.Time
	IdempotencyKey string
	WorkerID       string
}

// DeadGroup is the dead letters of one kind and failure class.
type DeadGroup struct {
	Kind    string
	Class   string
	Count   int64
	Flagged int64
	LastAt  time.Time
	Example string
}

// Counts are the overview's figures of one group (all, a kind, a tenant).
type Counts struct {
	Pending, Due, Running, Dead, Flagged int64
	Succeeded, Failed, Died              int64 // last hour
	FailRate                             float64
}

// GroupRow is the counts of one kind (Key) or one tenant (TenantID).
type GroupRow struct {
	Key      string
	TenantID int64
	Counts
}

// WorkerRow is one engine's heartbeat.
type WorkerRow struct {
	WorkerID      string
	StartedAt     time.Time
	LastHeartbeat time.Time
	Running       int
	Capacity      int
	Queues        []string
	Leader        bool
}

// Snapshot is one overview snapshot.
type Snapshot struct {
	AsOf time.Time
	// ScheduledAsOf is when the jobs scheduled ahead (left out of Due)
	// were last counted; nil when never.
	ScheduledAsOf *time.Time
	Totals        Counts
	HasLag        bool // a due job is waiting
	Lag           time.Duration
	ByKind        []GroupRow
	ByTenant      []GroupRow
	Minutes       []components.ChartMinute
	Workers       []WorkerRow
}
