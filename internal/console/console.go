// Package console is the staff's window on the job engine and their
// repairs to it: the queue overview, the job list across tenants, dead
// letters grouped and listed, one job with its audit trail, the jobs of a
// trace, retry and discard (one job or in bulk), and a tenant's read-only
// list of its own jobs. It reads what internal/job's engine writes and
// never runs a job. Every method opens its own transaction on the right
// pool: the system pool for staff (across tenants), a tenant-scoped
// transaction on the app pool for a tenant's own page.
package console

import (
	"context"
	"time"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/tenant"
)

// Kinds tells the console a kind's options (its retry budget); the engine
// satisfies it.
type Kinds interface {
	KindOptions(kind string) (job.KindOptions, bool)
}

// Service is the console's entry point.
type Service struct {
	app     database.Pool         // jejak_app: one tenant's own jobs
	system  database.SnapshotPool // jejak_system: staff reads and actions
	clock   clock.Clock
	kinds   Kinds
	tenants *tenant.Service
	audit   *audit.Service
	rec     *audit.Recorder
	// scanWindow bounds a staff list page whose filters no index serves.
	scanWindow int64
	observer   job.Observer // hears of discarded jobs
}

// Read is one read of ReadTogether: a statement on the system pool.
type Read = database.Read

// ReadTogether runs staff reads (each one statement on the system pool,
// independent of the others) with all their statements in one round trip
// (database.ReadAll): a staff page that shows several services' figures.
func (s *Service) ReadTogether(ctx context.Context, reads ...Read) error {
	return database.ReadAll(ctx, s.system, reads...)
}

// Config wires a Service.
type Config struct {
	App     database.Pool
	System  database.SnapshotPool
	Clock   clock.Clock // nil = clock.Database{}
	Kinds   Kinds       // nil = every kind has job.DefaultMaxAttempts
	Tenants *tenant.Service
	Audit   *audit.Service
	// Observer hears of jobs staff discard (they end cancelled); nil =
	// none. The engine's, so they count in the same metrics.
	Observer job.Observer
	// ScanWindow is how many job ids one page of the staff job list
	// searches when its filters have no index (kind, queue, trace,
	// idempotency key, payload without a tenant or id); 0 =
	// DefaultScanWindow.
	ScanWindow int64
}

// DefaultScanWindow bounds one staff job list page with unindexed filters
// to the newest 20,000 job ids below its cursor: a filter that rarely
// matches costs one bounded scan per page, not a walk of the whole table,
// and "older" searches the next window.
const DefaultScanWindow = 20_000

// New returns a console Service.
func New(c Config) *Service {
	if c.Clock == nil {
		c.Clock = clock.Database{}
	}
	if c.ScanWindow <= 0 {
		c.ScanWindow = DefaultScanWindow
	}
	if c.Observer == nil {
		c.Observer = job.NopObserver{}
	}
	return &Service{app: c.App, system: c.System, clock: c.Clock, kinds: c.Kinds, tenants: c.Tenants,
		audit: c.Audit, rec: audit.NewRecorder(c.Clock), scanWindow: c.ScanWindow, observer: c.Observer}
}

// Row is one job in a list: the staff pages show all of it, the tenant's
// read-only page a subset (no payload, no worker internals). Errors (the
// attempt history) is filled only for a trace's jobs.
type Row struct {
	ID          int64
	TenantID    int64
	Kind        string
	Queue       string
	Priority    int16
	State       job.State
	Attempt     int
	MaxAttempts int
	AvailableAt time.Time
	CreatedAt   time.Time
	FinishedAt  *time.Time
	LastError   string
	Class       job.Class
	Flagged     bool
	TraceID     string
	WorkerID    string
	Errors      []job.AttemptError
}

func rowID(r *Row) int64 { return r.ID }

// Job is one job's full stored state, for its detail page.
type Job struct {
	job.Job
	State      job.State
	FinishedAt *time.Time
	LastError  string
	Class      job.Class
	Flagged    bool
	Errors     []job.AttemptError
}

// Tenants lists every tenant for labels and filters.
func (s *Service) Tenants(ctx context.Context) (tenant.Names, error) { return s.tenants.Names(ctx) }
