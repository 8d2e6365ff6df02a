// Package incident answers "what happened in this trace?" for support: in
// time order, who started it, every job and attempt it caused (worker,
// error), every audit event in every tenant it touched, and whatever other
// trace-stamped records are plugged in as Sources (approvals, outbox
// messages, webhook deliveries). Every lookup goes through an index keyed
// by trace id (job_traces for jobs, audit_events_trace_idx for events), so
// the page does not scan jobs or the audit trail.
package incident

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/apperr"
)

// TraceIDPattern admits the trace ids Jejak makes (32 hex digits) and those
// arriving from other systems, without spaces or markup.
var TraceIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,200}$`)

// Limit caps each section (jobs, audit events, each source).
const Limit = 500

// Entry kinds on the timeline.
const (
	KindJob      = "job"      // a job was enqueued
	KindAttempt  = "attempt"  // an attempt ended (failed, or the last one succeeded)
	KindAudit    = "audit"    // an audit event
	KindPruned   = "pruned"   // a job of the trace, since deleted by retention
	KindOutbox   = "outbox"   // an outbox message (Source)
	KindDelivery = "delivery" // a webhook delivery (Source)
	KindApproval = "approval" // an approval request (Source)
)

// Entry is one line of the timeline.
type Entry struct {
	At       time.Time
	Kind     string
	TenantID int64
	JobID    int64  // 0 when not about a job
	ActorID  *int64 // the user who did it, when one did
	Actor    string // "user", "staff", "system" or a worker id
	Title    Text   // e.g. "email.weekly-report enqueued" (incident.t.job_enqueued with the kind)
	Detail   []Text // short extra parts (entity, attempt number, state), shown joined by " · "
	Error    string
	Worker   string
	Link     string // where to look closer (staff URL)
}

// Text is a phrase of the timeline as a catalog key (incident.t.…) and its
// values, which the web layer words in the reader's language. A Text
// without a Key is data (an action code, a reason, a URL) shown as Raw.
// Ids are passed as strings so they are never grouped like counts; a Code
// is a value shown through its enum group (a job state, a failure class).
type Text struct {
	Key  string
	Args []any
	Raw  string
}

// Code is a fixed value shown to people through its group's translations
// (i18n.Enum), e.g. {"state", "dead"}.
type Code struct{ Group, Value string }

func text(key string, args ...any) Text { return Text{Key: key, Args: args} }

func raw(s string) Text { return Text{Raw: s} }

func id(n int64) string { return strconv.FormatInt(n, 10) }

// Job is one job of the trace as it stands now.
type Job struct {
	ID          int64
	TenantID    int64
	Kind        string
	Queue       string
	State       string
	Attempt     int
	MaxAttempts int
	CreatedAt   time.Time
	FinishedAt  *time.Time
	Worker      string
	LastError   string
	Class       string
	Flagged     bool
	RequestedBy *int64
}

// Tenant is a tenant the trace touched.
type Tenant struct {
	ID   int64
	Slug string
	Name string
}

// User is a person who acted in the trace.
type User struct {
	ID    int64
	Name  string
	Email string
}

// Incident is everything known about one trace.
type Incident struct {
	TraceID string
	Entries []Entry // time order
	Jobs    []Job
	Tenants []Tenant // every tenant touched; more than one is worth a flag
	Users   map[int64]User
	// Starter is the user who started the trace (the earliest actor), if any.
	Starter *User
	// Truncated is set when a section hit Limit.
	Truncated bool
}

// CrossTenant reports whether the trace touched more than one tenant.
func (in *Incident) CrossTenant() bool { return len(in.Tenants) > 1 }

// Source adds trace-stamped records of another area (outbox, deliveries,
// approvals) to the timeline. It runs in the incident's read-only
// transaction on the system pool.
type Source func(ctx context.Context, tx pgx.Tx, traceID string, limit int) ([]Entry, error)

// Service reads incidents through the cross-tenant system pool.
type Service struct {
	pool    *pgxpool.Pool
	sources []Source
}

// NewService returns a Service over the system pool with extra sources.
func NewService(system *pgxpool.Pool, sources ...Source) *Service {
	return &Service{pool: system, sources: sources}
}

// ValidateTraceID returns an apperr.Invalid error for an unusable id.
func ValidateTraceID(id string) error {
	switch {
	case id == "":
		return apperr.Invalid("trace", "Enter a trace id.")
	case !TraceIDPattern.MatchString(id):
		return apperr.Invalid("trace", "A trace id has letters, digits and . _ : - only (at most 200).")
	}
	return nil
}

// Get assembles the incident of traceID in one read-only transaction.
func (s *Service) Get(ctx context.Context, traceID string) (*Incident, error) {
	if err := ValidateTraceID(traceID); err != nil {
		return nil, err
	}
	in := &Incident{TraceID: traceID, Users: map[int64]User{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		st := newStore(tx)
		jobs, err := st.jobs(ctx, traceID, Limit)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			in.Jobs = append(in.Jobs, j.job)
			in.Entries = append(in.Entries, jobEntries(j.job, j.errors)...)
		}
		pruned, err := st.pruned(ctx, traceID, Limit)
		if err != nil {
			return err
		}
		in.Entries = append(in.Entries, pruned...)
		events, err := st.audit(ctx, traceID, Limit)
		if err != nil {
			return err
		}
		in.Entries = append(in.Entries, events...)
		in.Truncated = len(jobs) == Limit || len(pruned) == Limit || len(events) == Limit
		for _, src := range s.sources {
			more, err := src(ctx, tx, traceID, Limit)
			if err != nil {
				return err
			}
			in.Truncated = in.Truncated || len(more) == Limit
			in.Entries = append(in.Entries, more...)
		}
		sort.SliceStable(in.Entries, func(a, b int) bool { return in.Entries[a].At.Before(in.Entries[b].At) })

		tenantIDs, userIDs := map[int64]bool{}, map[int64]bool{}
		for _, e := range in.Entries {
			tenantIDs[e.TenantID] = true
			if e.ActorID != nil {
				userIDs[*e.ActorID] = true
			}
		}
		if in.Tenants, err = st.tenants(ctx, keys(tenantIDs)); err != nil {
			return err
		}
		users, err := st.users(ctx, keys(userIDs))
		if err != nil {
			return err
		}
		for _, u := range users {
			in.Users[u.ID] = u
		}
		for _, e := range in.Entries {
			if e.ActorID != nil {
				if u, ok := in.Users[*e.ActorID]; ok {
					in.Starter = &u
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("incident of trace %s: %w", traceID, err)
	}
	return in, nil
}

func keys(m map[int64]bool) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

// attemptError is one element of jobs.errors.
type attemptError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Worker  string    `json:"worker"`
	Class   string    `json:"class"`
	Error   string    `json:"error"`
}

// jobEntries turns a job into its timeline: enqueued, each failed attempt,
// and the final attempt when it succeeded or is running.
func jobEntries(j Job, rawErrors json.RawMessage) []Entry {
	link := "/admin/jobs/" + id(j.ID)
	out := []Entry{{At: j.CreatedAt, Kind: KindJob, TenantID: j.TenantID, JobID: j.ID, ActorID: j.RequestedBy,
		Actor: actorOf(j.RequestedBy), Title: text("incident.t.job_enqueued", j.Kind),
		Detail: []Text{text("incident.t.job_detail", j.Queue, Code{"state", j.State}, j.Attempt, j.MaxAttempts)},
		Link:   link}}
	var errs []attemptError
	_ = json.Unmarshal(rawErrors, &errs) // NULL or malformed history: no attempt lines
	for _, a := range errs {
		out = append(out, Entry{At: a.At, Kind: KindAttempt, TenantID: j.TenantID, JobID: j.ID, Actor: a.Worker,
			Title: text("incident.t.attempt_failed", a.Attempt, Code{"class", a.Class}), Error: a.Error, Worker: a.Worker, Link: link})
	}
	if j.State == "succeeded" && j.FinishedAt != nil {
		out = append(out, Entry{At: *j.FinishedAt, Kind: KindAttempt, TenantID: j.TenantID, JobID: j.ID, Actor: j.Worker,
			Title: text("incident.t.attempt_succeeded", j.Attempt), Worker: j.Worker, Link: link})
	}
	if j.State == "dead" && j.FinishedAt != nil {
		out = append(out, Entry{At: *j.FinishedAt, Kind: KindAttempt, TenantID: j.TenantID, JobID: j.ID, Actor: j.Worker,
			Title: text("incident.t.dead_lettered"), Error: j.LastError, Worker: j.Worker, Link: link})
	}
	if j.State == "cancelled" && j.FinishedAt != nil {
		out = append(out, Entry{At: *j.FinishedAt, Kind: KindAttempt, TenantID: j.TenantID, JobID: j.ID,
			Title: text("incident.t.cancelled"), Link: link})
	}
	return out
}

func actorOf(id *int64) string {
	if id == nil {
		return "system"
	}
	return "user"
}
