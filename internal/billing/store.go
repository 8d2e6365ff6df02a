package billing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/queries"
)

func subscribeTx(ctx context.Context, tx pgx.Tx, tenantID int64, planCode string, actorID *int64, now *time.Time, refuseSame bool) (Subscription, Change, error) {
	q := queries.New(tx)
	if _, err := q.PlanGet(ctx, planCode); errors.Is(err, pgx.ErrNoRows) {
		return Subscription{}, Change{}, ErrUnknownPlan
	} else if err != nil {
		return Subscription{}, Change{}, fmt.Errorf("look up plan: %w", err)
	}
	var from *string
	// First subscription: a plain insert. ON CONFLICT DO NOTHING waits for
	// a concurrent first insert, so two racing subscribes never both
	// believe they were first.
	row, err := q.SubscriptionInsertNew(ctx, queries.SubscriptionInsertNewParams{
		TenantID: tenantID, PlanCode: planCode, PeriodDays: PeriodDays, Now: now,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		// Existing subscription: lock it to read the plan being replaced.
		old, err := q.SubscriptionGetForUpdate(ctx, tenantID)
		if err != nil {
			return Subscription{}, Change{}, fmt.Errorf("lock current subscription: %w", err)
		}
		if refuseSame && old.PlanCode == planCode {
			return Subscription{}, Change{}, ErrSamePlan
		}
		from = &old.PlanCode
		row, err = q.SubscriptionChangePlan(ctx, queries.SubscriptionChangePlanParams{
			TenantID: tenantID, PlanCode: planCode, PeriodDays: PeriodDays, Now: now,
		})
		if err != nil {
			return Subscription{}, Change{}, fmt.Errorf("change plan: %w", err)
		}
	} else if err != nil {
		return Subscription{}, Change{}, fmt.Errorf("insert subscription: %w", err)
	}
	c, err := q.SubscriptionChangeInsert(ctx, queries.SubscriptionChangeInsertParams{
		TenantID: tenantID, FromPlan: from, ToPlan: planCode, ChangedBy: actorID, Now: now,
	})
	if err != nil {
		return Subscription{}, Change{}, fmt.Errorf("record plan change: %w", err)
	}
	return subscription(row), change(c), nil
}

func sweepTx(ctx context.Context, tx pgx.Tx, tenantID, jobID *int64, now *time.Time) ([]StatusChange, error) {
	rows, err := queries.New(tx).SubscriptionSweep(ctx, queries.SubscriptionSweepParams{
		TenantID: tenantID, JobID: jobID, Now: now, GraceDays: GraceDays,
	})
	if err != nil {
		return nil, err
	}
	out := make([]StatusChange, len(rows))
	for i, r := range rows {
		out[i] = statusChange(r)
	}
	return out, nil
}

// Get returns tenantID's current subscription, or ErrNotFound.
func Get(ctx context.Context, db queries.DBTX, tenantID int64) (Subscription, error) {
	r, err := queries.New(db).SubscriptionGet(ctx, tenantID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Subscription{}, ErrNotFound
	}
	if err != nil {
		return Subscription{}, fmt.Errorf("get subscription of tenant %d: %w", tenantID, err)
	}
	return subscription(r), nil
}

// ListChanges returns tenantID's plan history, newest first.
func ListChanges(ctx context.Context, tx pgx.Tx, tenantID int64) ([]Change, error) {
	rows, err := queries.New(tx).SubscriptionChangeList(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list plan changes of tenant %d: %w", tenantID, err)
	}
	out := make([]Change, len(rows))
	for i, r := range rows {
		out[i] = change(r)
	}
	return out, nil
}

// ListStatusChanges returns tenantID's status history, oldest first.
func ListStatusChanges(ctx context.Context, tx pgx.Tx, tenantID int64) ([]StatusChange, error) {
	rows, err := queries.New(tx).SubscriptionStatusChangeList(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list status changes of tenant %d: %w", tenantID, err)
	}
	out := make([]StatusChange, len(rows))
	for i, r := range rows {
		out[i] = statusChange(r)
	}
	return out, nil
}

func subscription(r queries.Subscription) Subscription {
	return Subscription{
		TenantID: r.TenantID, PlanCode: r.PlanCode, Status: Status(r.Status),
		PeriodStart: r.CurrentPeriodStart, PeriodEnd: r.CurrentPeriodEnd, UpdatedAt: r.UpdatedAt,
	}
}

func change(r queries.SubscriptionChange) Change {
	return Change{ID: r.ID, TenantID: r.TenantID, FromPlan: r.FromPlan, ToPlan: r.ToPlan, ChangedBy: r.ChangedBy, ChangedAt: r.ChangedAt}
}

func statusChange(r queries.SubscriptionStatusChange) StatusChange {
	return StatusChange{
		ID: r.ID, TenantID: r.TenantID, FromStatus: Status(r.FromStatus), ToStatus: Status(r.ToStatus),
		ChangedAt: r.ChangedAt, JobID: r.JobID,
	}
}
