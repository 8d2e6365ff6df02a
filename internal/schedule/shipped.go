package schedule

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/job"
)

// Enqueuer is the part of the job engine schedules need.
type Enqueuer interface {
	EnqueueMany(ctx context.Context, tx job.Querier, ps []job.EnqueueParams) ([]int64, error)
}

// perTenant enqueues one job of kind for every tenant, keyed by the
// period so a second claim of the period (which the run row already
// prevents) would still add nothing.
func perTenant(e Enqueuer, kind, keyPrefix string) Action {
	return func(ctx context.Context, tx pgx.Tx, p Period) (int, string, error) {
		ids, err := TenantIDs(ctx, tx)
		if err != nil {
			return 0, "", err
		}
		ps := make([]job.EnqueueParams, len(ids))
		for i, id := range ids {
			payload, _ := json.Marshal(map[string]int64{"tenant_id": id})
			ps[i] = job.EnqueueParams{TenantID: id, Kind: kind, Payload: payload, IdempotencyKey: keyPrefix + ":" + p.Key}
		}
		if _, err := e.EnqueueMany(ctx, tx, ps); err != nil {
			return 0, "", err
		}
		return len(ps), fmt.Sprintf("%d tenant(s)", len(ps)), nil
	}
}

// Shipped are Jejak's periodic tasks. Job retention is not among them:
// the maintenance leader prunes finished jobs on every pass already.
func Shipped(e Enqueuer) []Schedule {
	return []Schedule{
		{Name: "subscription.sweep", Every: Daily, About: "recompute every subscription's status (active, grace, expired)",
			Action: perTenant(e, "subscription.sweep", "sweep")},
		{Name: "email.weekly-report", Every: Weekly, About: "send each tenant's weekly report to its owners and admins",
			Action: perTenant(e, "email.weekly-report", "weekly-report")},
		{Name: "payment.reconcile", Every: Daily, About: "compare provider charges with invoices; refund duplicates",
			Action: perTenant(e, "payment.reconcile", "reconcile")},
	}
}
