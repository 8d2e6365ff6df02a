// Package incident answers "what happened in this trace?" for support: in
// time order, who started it, every job and attempt it caused (worker,
// error), every audit event in every tenant it touched, its outbox
// messages and their webhook deliveries, and its two-person approvals.
// Every section starts from an index keyed by trace id (job_traces for
// jobs, audit_events_trace_idx for events, outbox_traces for messages) and
// is read in one statement (TraceIncident), so the page neither scans jobs
// or the audit trail nor pays a round trip per section.
package incident

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/database"
)

// TraceIDPattern admits the trace ids Jejak makes (32 hex digits) and those
// arriving from other systems, without spaces or markup.
var TraceIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,200}$`)

// Limit caps each section (jobs, audit events, outbox messages, deliveries,
// approvals). TraceIncident writes it as a literal in its LIMITs, so that
// the server keeps one plan for the statement; change both together.
const Limit = 500

// Entry kinds on the timeline.
const (
	KindJob      = "job"      // a job was enqueued
	KindAttempt  = "attempt"  // an attempt ended (failed, or the last one succeeded)
	KindAudit    = "audit"    // an audit event
	KindPruned   = "pruned"   // a job of the trace, since deleted by retention
	KindOutbox   = "outbox"   // an outbox message
	KindDelivery = "delivery" // a webhook delivery
	KindApproval = "approval" // an approval request
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

// Service reads incidents through the cross-tenant system pool.
type Service struct {
	pool database.Querier
}

// NewService returns a Service over the system pool.
func NewService(system database.Querier) *Service {
	return &Service{pool: system}
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

// Get assembles the incident of traceID. Every section comes from one
// statement, so the page costs one round trip and reads one snapshot.
func (s *Service) Get(ctx context.Context, traceID string) (*Incident, error) {
	if err := ValidateTraceID(traceID); err != nil {
		return nil, err
	}
	rows, err := newStore(s.pool).trace(ctx, traceID)
	if err != nil {
		return nil, fmt.Errorf("incident of trace %s: %w", traceID, err)
	}
	in := &Incident{TraceID: traceID, Users: map[int64]User{}, Tenants: rows.tenants}
	for _, r := range rows.jobs {
		if r.State == nil {
			in.Entries = append(in.Entries, Entry{At: r.TracedAt, Kind: KindPruned, TenantID: r.TenantID, JobID: r.JobID,
				Title: text("incident.t.pruned", id(r.JobID))})
			continue
		}
		j := r.job()
		in.Jobs = append(in.Jobs, j)
		in.Entries = append(in.Entries, jobEntries(j, r.Errors)...)
	}
	in.Entries = append(in.Entries, auditEntries(rows.events)...)
	in.Entries = append(in.Entries, outboxEntries(rows.messages, rows.deliveries)...)
	in.Entries = append(in.Entries, approvalEntries(rows.approvals)...)
	in.Truncated = len(rows.jobs) == Limit || len(rows.events) == Limit || len(rows.messages) == Limit ||
		len(rows.deliveries) == Limit || len(rows.approvals) == Limit
	sort.SliceStable(in.Entries, func(a, b int) bool { return in.Entries[a].At.Before(in.Entries[b].At) })
	for _, u := range rows.users {
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
	return in, nil
}

// auditEntries are the trace's audit events on the timeline.
func auditEntries(rows []eventRow) []Entry {
	out := make([]Entry, len(rows))
	for i, r := range rows {
		e := Entry{At: r.OccurredAt, Kind: KindAudit, TenantID: r.TenantID, ActorID: r.ActorID, Actor: r.ActorKind,
			Title: raw(r.Action), Detail: []Text{raw(r.Entity + " " + r.EntityID), raw("#" + id(r.Seq))}}
		if r.JobID != nil {
			e.JobID = *r.JobID
			e.Link = "/admin/jobs/" + id(*r.JobID)
		}
		var d struct {
			Error  string `json:"error"`
			Worker string `json:"worker_id"`
		}
		if json.Unmarshal(r.Detail, &d) == nil {
			e.Error, e.Worker = d.Error, d.Worker
		}
		out[i] = e
	}
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
