// Package points keeps each tenant's loyalty points: an append-only ledger,
// a running balance per customer, and the points.award job kind. Awards are
// idempotent per message id (messages are delivered at least once): the
// dedup claim is an atomic
// INSERT ... ON CONFLICT DO NOTHING in the same transaction as the ledger
// row and the balance update, so a redelivered or concurrently duplicated
// message awards once.
package points

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/kinds/payload"
	"github.com/jejakhq/jejak/internal/outbox"
)

// Kind is the job kind that awards points.
const Kind = "points.award"

// Consumer is the name points.award claims message ids under in
// processed_messages; other consumers keep their own namespace.
const Consumer = "points.award"

// MaxPoints caps one award; anything larger is treated as a bad message.
const MaxPoints = 1_000_000

// ErrNotFound is returned when a customer has no balance yet.
var ErrNotFound = apperr.NotFound("points: not found")

// ErrInvalid is returned for an award that breaks a rule (empty customer,
// non-positive points, missing message id).
var ErrInvalid = &apperr.Error{Code: apperr.CodeInvalid, Message: "points: invalid award"}

// Award is one grant of points, identified by the message that caused it.
type Award struct {
	MessageID string // the event/message id; the unit of dedup
	Customer  string // the tenant's customer reference (e.g. an e-mail address)
	Points    int64
	Reason    string
	// RequestedBy is the user the award is made for (the job's requester;
	// nil: the system): its points.awarded event, and the webhook
	// deliveries of that event, are attributed to them.
	RequestedBy *int64
}

// Validate checks an award's fields.
func (a Award) Validate() error {
	switch {
	case strings.TrimSpace(a.MessageID) == "" || len(a.MessageID) > 200:
		return fmt.Errorf("%w: message_id must be 1-200 characters", ErrInvalid)
	case strings.TrimSpace(a.Customer) == "" || len(a.Customer) > 200:
		return fmt.Errorf("%w: customer must be 1-200 characters", ErrInvalid)
	case a.Points <= 0 || a.Points > MaxPoints:
		return fmt.Errorf("%w: points must be between 1 and %d", ErrInvalid, MaxPoints)
	}
	return nil
}

// Balance is a customer's current points total.
type Balance struct {
	TenantID  int64
	Customer  string
	Balance   int64
	UpdatedAt time.Time
}

// Entry is one ledger row.
type Entry struct {
	ID        int64
	Customer  string
	Points    int64
	Reason    string
	MessageID string
	CreatedAt time.Time
}

// Service awards points; its clock stamps ledger and dedup rows.
type Service struct {
	clock  clock.Clock
	outbox *outbox.Writer
}

// NewService returns a Service reading time from c (nil = database clock).
func NewService(c clock.Clock) *Service {
	if c == nil {
		c = clock.Database{}
	}
	return &Service{clock: c, outbox: outbox.NewWriter(c)}
}

// Award applies a in tx exactly once per (tenant, message id). It reports
// whether this call applied it (false: the message was already processed,
// and nothing was written). tx must be scoped to tenantID.
func (s *Service) Award(ctx context.Context, tx pgx.Tx, tenantID int64, a Award) (applied bool, err error) {
	if err := a.Validate(); err != nil {
		return false, err
	}
	if applied, err = awardTx(ctx, tx, tenantID, a, s.clock.Now()); err != nil || !applied {
		return applied, err
	}
	// The award's event commits with it; a replayed message publishes
	// nothing because nothing was applied.
	_, err = s.outbox.Publish(ctx, tx, tenantID, a.message())
	return err == nil, err
}

// AwardMany is Award for many awards of one tenant: one statement claims
// their message ids and writes their ledger rows, one adds them to the
// balances and one publishes their outbox messages. It returns, in order,
// the indexes of the awards it applied; a message id given twice is applied
// once, as given first.
//
// The balances and the messages go with COMMIT (database.AtCommit): a
// customer's balance row and the customer's outbox turn are what batches
// of the tenant on other replicas also lock, and sent last they are held
// for the commit only, not while this process gets around to sending its
// next statement.
func (s *Service) AwardMany(ctx context.Context, tx pgx.Tx, tenantID int64, awards []Award) ([]int, error) {
	for _, a := range awards {
		if err := a.Validate(); err != nil {
			return nil, err
		}
	}
	now := s.clock.Now()
	ids, err := claimManyTx(ctx, tx, tenantID, awards, now)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	applied := firstApplied(awards, ids)
	won := make([]Award, len(applied))
	msgs := make([]outbox.Message, len(applied))
	for k, i := range applied {
		won[k] = awards[i]
		msgs[k] = awards[i].message()
	}
	atCommit := database.AtCommit(tx)
	if err := addBalances(ctx, atCommit, tenantID, won, now); err != nil {
		return nil, err
	}
	return applied, s.outbox.PublishMany(ctx, atCommit, tenantID, msgs)
}

// firstApplied returns, in order, the first award of each applied message id.
func firstApplied(awards []Award, applied map[string]bool) []int {
	seen := make(map[string]bool, len(applied))
	var out []int
	for i, a := range awards {
		if applied[a.MessageID] && !seen[a.MessageID] {
			seen[a.MessageID] = true
			out = append(out, i)
		}
	}
	return out
}

// message is the outbox message announcing a.
func (a Award) message() outbox.Message {
	return outbox.Message{Type: "points.awarded", AggregateType: "customer", AggregateID: a.Customer, RequestedBy: a.RequestedBy,
		Payload: map[string]any{"customer": a.Customer, "points": a.Points, "reason": a.Reason, "message_id": a.MessageID}}
}

// Handler runs points.award jobs against the tenant-scoped pool. Jobs of
// one tenant that run at the same time are written together (see batch.go).
type Handler struct {
	App     database.Beginner // jejak_app pool: RLS pins work to the job's tenant
	Service *Service
	batch   batcher
}

// awardPayload is points.award's JSON payload.
type awardPayload struct {
	TenantID  int64  `json:"tenant_id"`
	MessageID string `json:"message_id"`
	Customer  string `json:"customer"`
	Points    int64  `json:"points"`
	Reason    string `json:"reason"`
}

// Handle is the job.Handler for points.award.
func (h *Handler) Handle(ctx context.Context, j *job.Job) error {
	var p awardPayload
	if err := payload.Decode(j, &p); err != nil {
		return err
	}
	a := Award{MessageID: p.MessageID, Customer: p.Customer, Points: p.Points, Reason: p.Reason, RequestedBy: j.RequestedBy}
	if err := a.Validate(); err != nil {
		return job.Permanent(fmt.Errorf("points.award job %d: %w", j.ID, err))
	}
	if err := h.awardBatched(ctx, j, a); err != nil {
		return fmt.Errorf("points.award job %d: %w", j.ID, err)
	}
	return nil
}

// awardOne applies one job's award in a transaction of its own.
func (h *Handler) awardOne(ctx context.Context, j *job.Job, a Award) error {
	return database.InTenantTxAsyncCommit(ctx, h.App, j.TenantID, func(tx pgx.Tx) error {
		applied, err := h.Service.Award(ctx, tx, j.TenantID, a)
		if err != nil || !applied {
			return err // !applied: a redelivery; the first one was recorded
		}
		return audit.NewRecorder(h.Service.clock).RecordWork(ctx, tx, awardWork(j, a))
	})
}

// awardMany applies the awards of jobs of one tenant in one transaction.
func (h *Handler) awardMany(ctx context.Context, tenantID int64, reqs []*request) error {
	awards := make([]Award, len(reqs))
	for i, r := range reqs {
		awards[i] = r.a
	}
	return database.InTenantTxAsyncCommit(ctx, h.App, tenantID, func(tx pgx.Tx) error {
		applied, err := h.Service.AwardMany(ctx, tx, tenantID, awards)
		if err != nil || len(applied) == 0 {
			return err
		}
		works := make([]audit.WorkDone, len(applied))
		for k, i := range applied {
			works[k] = awardWork(reqs[i].j, reqs[i].a)
		}
		return audit.NewRecorder(h.Service.clock).RecordWorks(ctx, tx, works)
	})
}

// awardWork is the trail's record of the award a that job j applied.
func awardWork(j *job.Job, a Award) audit.WorkDone {
	return audit.WorkDone{TenantID: j.TenantID, Action: "points.awarded", Entity: "customer", EntityID: a.Customer,
		TraceID: j.TraceID, JobID: j.ID, Detail: map[string]any{"points": a.Points, "message_id": a.MessageID, "reason": a.Reason}}
}
