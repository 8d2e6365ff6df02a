// Package billing holds plans and each tenant's subscription: subscribing
// (which appends to the plan-change history instead of overwriting it, so
// the history of what a tenant paid for survives) and the
// subscription.sweep job kind that moves a subscription from active to
// grace to expired as its period runs out.
package billing

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/clock"
)

// Subscription periods and the grace that follows them (for example a
// subscription taken on 2026-02-01 09:00 ends 2026-03-03 09:00 and is in
// grace two days later).
const (
	PeriodDays = 30
	GraceDays  = 7
)

// Status is a subscription's state.
type Status string

// Subscription statuses. The sweep moves active → grace → expired;
// cancelled is set by hand and left alone by the sweep.
const (
	StatusActive    Status = "active"
	StatusGrace     Status = "grace"
	StatusExpired   Status = "expired"
	StatusCancelled Status = "cancelled"
)

// StatusAt is the status a non-cancelled subscription whose period ends at
// periodEnd has at now: active before the end, grace for GraceDays after
// it, expired from then on. The sweep computes the same in SQL; this is
// for callers holding a subscription in memory (e.g. a page).
func StatusAt(periodEnd, now time.Time) Status {
	switch {
	case now.Before(periodEnd):
		return StatusActive
	case now.Before(periodEnd.AddDate(0, 0, GraceDays)):
		return StatusGrace
	default:
		return StatusExpired
	}
}

// Errors returned by the package.
var (
	// ErrNotFound: the tenant has no subscription.
	ErrNotFound = apperr.NotFound("billing: not found")
	// ErrUnknownPlan: no plan has that code; nothing was written.
	ErrUnknownPlan = apperr.Invalid("plan", "Unknown plan.")
	// ErrSamePlan: a plan change to the current plan; nothing was written.
	ErrSamePlan = apperr.Invalid("plan", "The tenant is already on this plan.")
)

// Subscription is a tenant's current subscription.
type Subscription struct {
	TenantID    int64
	PlanCode    string
	Status      Status
	PeriodStart time.Time
	PeriodEnd   time.Time
	UpdatedAt   time.Time
}

// Change is one row of plan history: from FromPlan (nil for the first
// subscription) to ToPlan, by ChangedBy (nil for the system).
type Change struct {
	ID        int64
	TenantID  int64
	FromPlan  *string
	ToPlan    string
	ChangedBy *int64
	ChangedAt time.Time
}

// StatusChange is one status transition written by the sweep.
type StatusChange struct {
	ID         int64
	TenantID   int64
	FromStatus Status
	ToStatus   Status
	ChangedAt  time.Time
	JobID      *int64
}

// Service manages subscriptions; every reading of time comes from its clock.
type Service struct {
	clock clock.Clock
}

// NewService returns a Service reading time from c (nil = database clock).
func NewService(c clock.Clock) *Service {
	if c == nil {
		c = clock.Database{}
	}
	return &Service{clock: c}
}

// Subscribe puts tenantID on planCode for a fresh PeriodDays period from
// now and appends a subscription_changes row (from the previous plan, or
// none) in the caller's tx, so the change commits with whatever else the
// caller records (e.g. its audit event). A renewal on the same plan is
// recorded too. actorID is the user making the change (nil = system).
// An unknown plan returns ErrUnknownPlan and writes nothing.
func (s *Service) Subscribe(ctx context.Context, tx pgx.Tx, tenantID int64, planCode string, actorID *int64) (Subscription, Change, error) {
	planCode = strings.TrimSpace(planCode)
	if planCode == "" {
		return Subscription{}, Change{}, fmt.Errorf("subscribe tenant %d: %w: empty plan code", tenantID, ErrUnknownPlan)
	}
	sub, ch, err := subscribeTx(ctx, tx, tenantID, planCode, actorID, s.clock.Now(), false)
	if err != nil {
		return Subscription{}, Change{}, fmt.Errorf("subscribe tenant %d to %q: %w", tenantID, planCode, err)
	}
	return sub, ch, nil
}

// ChangePlan is Subscribe for a deliberate plan change: moving a tenant to
// the plan it is already on changes nothing, so it returns ErrSamePlan and
// writes nothing (the check runs under the subscription's row lock, so two
// racing identical changes cannot both pass it).
func (s *Service) ChangePlan(ctx context.Context, tx pgx.Tx, tenantID int64, planCode string, actorID *int64) (Subscription, Change, error) {
	planCode = strings.TrimSpace(planCode)
	if planCode == "" {
		return Subscription{}, Change{}, fmt.Errorf("change plan of tenant %d: %w: empty plan code", tenantID, ErrUnknownPlan)
	}
	sub, ch, err := subscribeTx(ctx, tx, tenantID, planCode, actorID, s.clock.Now(), true)
	if err != nil {
		return Subscription{}, Change{}, fmt.Errorf("change plan of tenant %d to %q: %w", tenantID, planCode, err)
	}
	return sub, ch, nil
}

// Sweep recomputes tenantID's subscription status at the clock's now and
// records any change (with jobID, when a job did it). It returns the
// changes made; none when the status was already right.
func (s *Service) Sweep(ctx context.Context, tx pgx.Tx, tenantID int64, jobID *int64) ([]StatusChange, error) {
	out, err := sweepTx(ctx, tx, &tenantID, jobID, s.clock.Now())
	if err != nil {
		return nil, fmt.Errorf("sweep subscription of tenant %d: %w", tenantID, err)
	}
	return out, nil
}

// SweepAll is Sweep for every tenant tx can see: meant for a jejak_system
// transaction (a jejak_app transaction only sees its own tenant).
func (s *Service) SweepAll(ctx context.Context, tx pgx.Tx, jobID *int64) ([]StatusChange, error) {
	out, err := sweepTx(ctx, tx, nil, jobID, s.clock.Now())
	if err != nil {
		return nil, fmt.Errorf("sweep all subscriptions: %w", err)
	}
	return out, nil
}
