package incident

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/ptr"
	"github.com/jejakhq/jejak/internal/queries"
)

// store is the only file of the package that touches sqlc's types.
type store struct{ q *queries.Queries }

func newStore(db database.Querier) store { return store{q: queries.New(db)} }

// traceRows is every section of one trace as TraceIncident returns them
// (each a JSON array; the field names are the statement's column names).
type traceRows struct {
	jobs       []jobRow
	events     []eventRow
	messages   []outboxRow
	deliveries []deliveryRow
	approvals  []approvalRow
	tenants    []Tenant
	users      []User
}

// jobRow is a job of the trace; State is "" when retention deleted it.
type jobRow struct {
	JobID       int64           `json:"job_id"`
	TenantID    int64           `json:"tenant_id"`
	TracedAt    time.Time       `json:"traced_at"`
	Kind        string          `json:"kind"`
	Queue       string          `json:"queue"`
	State       *string         `json:"state"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	CreatedAt   time.Time       `json:"created_at"`
	FinishedAt  *time.Time      `json:"finished_at"`
	WorkerID    *string         `json:"worker_id"`
	LastError   *string         `json:"last_error"`
	ErrorClass  *string         `json:"error_class"`
	Errors      json.RawMessage `json:"errors"`
	RequestedBy *int64          `json:"requested_by"`
	Flagged     bool            `json:"flagged"`
}

func (r jobRow) job() Job {
	return Job{ID: r.JobID, TenantID: r.TenantID, Kind: r.Kind, Queue: r.Queue, State: ptr.Value(r.State),
		Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt,
		Worker: ptr.Value(r.WorkerID), LastError: ptr.Value(r.LastError), Class: ptr.Value(r.ErrorClass), Flagged: r.Flagged,
		RequestedBy: r.RequestedBy}
}

type eventRow struct {
	TenantID   int64           `json:"tenant_id"`
	Seq        int64           `json:"seq"`
	ActorKind  string          `json:"actor_kind"`
	ActorID    *int64          `json:"actor_id"`
	Action     string          `json:"action"`
	Entity     string          `json:"entity"`
	EntityID   string          `json:"entity_id"`
	Detail     json.RawMessage `json:"detail"`
	OccurredAt time.Time       `json:"occurred_at"`
	JobID      *int64          `json:"job_id"`
}

type outboxRow struct {
	ID            int64      `json:"id"`
	TenantID      int64      `json:"tenant_id"`
	EventType     string     `json:"event_type"`
	AggregateType string     `json:"aggregate_type"`
	AggregateID   string     `json:"aggregate_id"`
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	CreatedAt     time.Time  `json:"created_at"`
	ProcessedAt   *time.Time `json:"processed_at"`
	LastError     *string    `json:"last_error"`
}

type deliveryRow struct {
	TenantID   int64     `json:"tenant_id"`
	EventID    int64     `json:"event_id"`
	EventType  string    `json:"event_type"`
	State      string    `json:"state"`
	Attempts   int       `json:"attempts"`
	LastStatus *int      `json:"last_status"`
	LastError  *string   `json:"last_error"`
	CreatedAt  time.Time `json:"created_at"`
	URL        string    `json:"url"`
}

type approvalRow struct {
	ID             int64      `json:"id"`
	TenantID       int64      `json:"tenant_id"`
	Action         string     `json:"action"`
	TargetID       int64      `json:"target_id"`
	Reason         string     `json:"reason"`
	RequestedBy    int64      `json:"requested_by"`
	RequestedAt    time.Time  `json:"requested_at"`
	State          string     `json:"state"`
	DecidedBy      *int64     `json:"decided_by"`
	DecidedAt      *time.Time `json:"decided_at"`
	DecisionReason *string    `json:"decision_reason"`
	JobID          *int64     `json:"job_id"`
}

type tenantRow struct {
	ID   int64  `json:"id"`
	Slug string `json:"slug"`
	Name string `json:"name"`
}

type userRow struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

// trace reads every section of traceID in one statement.
func (s store) trace(ctx context.Context, traceID string) (traceRows, error) {
	r, err := s.q.TraceIncident(ctx, traceID)
	if err != nil {
		return traceRows{}, err
	}
	var out traceRows
	var tenants []tenantRow
	var users []userRow
	for _, sec := range []struct {
		name string
		raw  []byte
		into any
	}{
		{"jobs", r.Jobs, &out.jobs}, {"events", r.Events, &out.events}, {"messages", r.Messages, &out.messages},
		{"deliveries", r.Deliveries, &out.deliveries}, {"approvals", r.Approvals, &out.approvals},
		{"tenants", r.Tenants, &tenants}, {"users", r.Users, &users},
	} {
		if err := json.Unmarshal(sec.raw, sec.into); err != nil {
			return traceRows{}, fmt.Errorf("decode %s: %w", sec.name, err)
		}
	}
	for _, t := range tenants {
		out.tenants = append(out.tenants, Tenant(t))
	}
	for _, u := range users {
		out.users = append(out.users, User(u))
	}
	return out, nil
}
