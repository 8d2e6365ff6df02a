package schedule

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/outbox"
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
		return len(ps), summary(resultTenants, int64(len(ps))), nil
	}
}

// Shipped are Jejak's periodic tasks that enqueue jobs; Retention adds
// the prunes.
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

// JobPruner is the part of the job engine the retention schedule needs.
type JobPruner interface {
	PruneFinished(ctx context.Context, db job.Querier) (int64, error)
}

// Retention are the prunes of finished jobs and delivered outbox messages
// (older than outboxAge), hourly so each run deletes an hour's worth. They
// run in the claiming transaction: a period's prune and its run record
// commit together, once across replicas. The job engine and the outbox
// relay must be configured with ScheduledPrune so they do not prune on
// every pass as well.
func Retention(jobs JobPruner, clk clock.Clock, outboxAge time.Duration) []Schedule {
	return []Schedule{
		{Name: "job.retention", Every: Hourly, About: "delete finished jobs past their retention (dead letters are kept unless configured)",
			Action: func(ctx context.Context, tx pgx.Tx, _ Period) (int, string, error) {
				n, err := jobs.PruneFinished(ctx, tx)
				return 0, summary(resultJobsPruned, n), err
			}},
		{Name: "outbox.retention", Every: Hourly, About: "delete outbox messages delivered more than " + outboxAge.String() + " ago",
			AboutArgs: []any{outboxAge},
			Action: func(ctx context.Context, tx pgx.Tx, _ Period) (int, string, error) {
				if outboxAge <= 0 {
					return 0, summary(resultRetentionOff), nil
				}
				n, err := outbox.PruneDelivered(ctx, tx, clk.Now(), outboxAge)
				return 0, summary(resultOutboxPruned, n), err
			}},
	}
}
