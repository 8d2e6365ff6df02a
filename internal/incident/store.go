package incident

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/queries"
)

// store is the only file of the package that touches sqlc's types.
type store struct{ q *queries.Queries }

func newStore(db database.Querier) store { return store{q: queries.New(db)} }

type jobRow struct {
	job    Job
	errors json.RawMessage
}

func (s store) jobs(ctx context.Context, traceID string, limit int) ([]jobRow, error) {
	rows, err := s.q.TraceJobs(ctx, queries.TraceJobsParams{TraceID: traceID, Lim: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]jobRow, len(rows))
	for i, r := range rows {
		out[i] = jobRow{job: Job{ID: r.ID, TenantID: r.TenantID, Kind: r.Kind, Queue: r.Queue, State: r.State,
			Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts), CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt,
			Worker: deref(r.WorkerID), LastError: deref(r.LastError), Class: deref(r.ErrorClass), Flagged: r.Flagged,
			RequestedBy: r.RequestedBy}, errors: r.Errors}
	}
	return out, nil
}

func (s store) pruned(ctx context.Context, traceID string, limit int) ([]Entry, error) {
	rows, err := s.q.TracePrunedJobs(ctx, queries.TracePrunedJobsParams{TraceID: traceID, Lim: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(rows))
	for i, r := range rows {
		out[i] = Entry{At: r.CreatedAt, Kind: KindPruned, TenantID: r.TenantID, JobID: r.JobID,
			Title: text("incident.t.pruned", id(r.JobID))}
	}
	return out, nil
}

func (s store) audit(ctx context.Context, traceID string, limit int) ([]Entry, error) {
	rows, err := s.q.TraceAudit(ctx, queries.TraceAuditParams{TraceID: traceID, Lim: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(rows))
	for i, r := range rows {
		e := Entry{At: r.OccurredAt, Kind: KindAudit, TenantID: r.TenantID, ActorID: r.ActorID, Actor: r.ActorKind,
			Title: raw(r.Action), Detail: []Text{raw(r.Entity + " " + r.EntityID), raw("#" + id(r.Seq))}}
		if r.JobID != nil {
			e.JobID = *r.JobID
			e.Link = "/admin/jobs/" + strconv.FormatInt(*r.JobID, 10)
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
	return out, nil
}

func (s store) tenants(ctx context.Context, ids []int64) ([]Tenant, error) {
	rows, err := s.q.TraceTenants(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]Tenant, len(rows))
	for i, r := range rows {
		out[i] = Tenant{ID: r.ID, Slug: r.Slug, Name: r.Name}
	}
	return out, nil
}

func (s store) users(ctx context.Context, ids []int64) ([]User, error) {
	rows, err := s.q.TraceUsers(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]User, len(rows))
	for i, r := range rows {
		out[i] = User{ID: r.ID, Name: r.Name, Email: r.Email}
	}
	return out, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

type outboxRow struct {
	id, tenantID         int64
	eventType, aggregate string
	state, lastError     string
	attempts             int
	createdAt            time.Time
	processedAt          *time.Time
}

func (s store) outbox(ctx context.Context, traceID string, limit int) ([]outboxRow, error) {
	rows, err := s.q.TraceOutbox(ctx, queries.TraceOutboxParams{TraceID: traceID, Lim: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]outboxRow, len(rows))
	for i, r := range rows {
		out[i] = outboxRow{id: r.ID, tenantID: r.TenantID, eventType: r.EventType, aggregate: r.AggregateType + " " + r.AggregateID,
			state: r.State, lastError: deref(r.LastError), attempts: int(r.Attempts), createdAt: r.CreatedAt, processedAt: r.ProcessedAt}
	}
	return out, nil
}

type deliveryRow struct {
	tenantID, eventID                int64
	eventType, state, lastError, url string
	attempts                         int
	lastStatus                       *int
	createdAt                        time.Time
}

func (s store) deliveries(ctx context.Context, eventIDs []int64, limit int) ([]deliveryRow, error) {
	rows, err := s.q.TraceDeliveries(ctx, queries.TraceDeliveriesParams{EventIds: eventIDs, Lim: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]deliveryRow, len(rows))
	for i, r := range rows {
		d := deliveryRow{tenantID: r.TenantID, eventID: r.EventID, eventType: r.EventType, state: r.State,
			lastError: deref(r.LastError), url: r.Url, attempts: int(r.Attempts), createdAt: r.CreatedAt}
		if r.LastStatus != nil {
			st := int(*r.LastStatus)
			d.lastStatus = &st
		}
		out[i] = d
	}
	return out, nil
}

type approvalRow struct {
	id, tenantID, targetID, requestedBy int64
	action, reason, state               string
	requestedAt                         time.Time
	decidedBy                           *int64
	decidedAt                           *time.Time
	decisionReason                      string
	jobID                               *int64
}

func (s store) approvals(ctx context.Context, traceID string, limit int) ([]approvalRow, error) {
	rows, err := s.q.TraceApprovals(ctx, queries.TraceApprovalsParams{TraceID: traceID, Lim: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]approvalRow, len(rows))
	for i, r := range rows {
		out[i] = approvalRow{id: r.ID, tenantID: r.TenantID, targetID: r.TargetID, requestedBy: r.RequestedBy,
			action: r.Action, reason: r.Reason, state: r.State, requestedAt: r.RequestedAt, decidedBy: r.DecidedBy,
			decidedAt: r.DecidedAt, decisionReason: deref(r.DecisionReason), jobID: r.JobID}
	}
	return out, nil
}
