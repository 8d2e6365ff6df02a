package outboxconsole

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/queries"
)

// This file is the only one in the package that touches sqlc's types.

type counts struct {
	pending, processing, failed int64
	oldestPending, now          time.Time
}

func storeCounts(ctx context.Context, db queries.DBTX, now *time.Time) (counts, error) {
	r, err := queries.New(db).OutboxConsoleCounts(ctx, queries.OutboxConsoleCountsParams{Cap: CountCap, Now: now})
	return counts{r.Pending, r.Processing, r.Failed, r.OldestPending, r.Now}, err
}

func storeMinutesSince(ctx context.Context, db queries.DBTX, since time.Time) (map[time.Time]Minute, error) {
	rows, err := queries.New(db).OutboxConsoleStatsSince(ctx, since)
	out := map[time.Time]Minute{}
	for _, r := range rows {
		out[r.Minute.UTC()] = Minute{At: r.Minute.UTC(), Delivered: r.Delivered, Failed: r.Failed}
	}
	return out, err
}

func storeFailed(ctx context.Context, db queries.DBTX, tenantID *int64, limit int) ([]FailedMessage, error) {
	rows, err := queries.New(db).OutboxConsoleFailed(ctx, queries.OutboxConsoleFailedParams{TenantID: tenantID, Lim: int32(limit)})
	out := make([]FailedMessage, len(rows))
	for i, r := range rows {
		out[i] = FailedMessage{ID: r.ID, TenantID: r.TenantID, TenantSlug: r.Slug, Type: r.EventType,
			AggregateType: r.AggregateType, AggregateID: r.AggregateID, Attempts: int(r.Attempts),
			LastError: r.LastError, CreatedAt: r.CreatedAt}
	}
	return out, err
}

func storeTenant(ctx context.Context, db queries.DBTX, slug string) (*int64, error) {
	if slug == "" {
		return nil, nil
	}
	id, err := queries.New(db).OutboxConsoleTenantBySlug(ctx, slug)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrTenantNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("find tenant %q: %w", slug, err)
	}
	return &id, nil
}

type retried struct{ id, tenantID int64 }

func storeRetry(ctx context.Context, db queries.DBTX, now *time.Time, tenantID, id *int64, limit int) ([]retried, error) {
	rows, err := queries.New(db).OutboxConsoleRetry(ctx, queries.OutboxConsoleRetryParams{Now: now, TenantID: tenantID, ID: id, Lim: int32(limit)})
	out := make([]retried, len(rows))
	for i, r := range rows {
		out[i] = retried{r.ID, r.TenantID}
	}
	return out, err
}

func storeOtherReplicas(ctx context.Context, db queries.DBTX, workerID string, now *time.Time) (int64, error) {
	return queries.New(db).OutboxConsoleOtherReplicas(ctx, queries.OutboxConsoleOtherReplicasParams{WorkerID: workerID, Now: now})
}

func storeFailingEndpoints(ctx context.Context, db queries.DBTX, now *time.Time, limit int) ([]FailingEndpoint, error) {
	rows, err := queries.New(db).OutboxConsoleFailingEndpoints(ctx, queries.OutboxConsoleFailingEndpointsParams{Now: now, Lim: int32(limit)})
	out := make([]FailingEndpoint, len(rows))
	for i, r := range rows {
		out[i] = FailingEndpoint{ID: r.ID, TenantSlug: r.Slug, URL: r.Url, Enabled: r.Enabled, DisabledReason: r.DisabledReason,
			ConsecutiveFailures: int(r.ConsecutiveFailures), FailingSince: r.FailingSince,
			BreakerOpen: r.BreakerOpenUntil != nil && r.BreakerOpenUntil.After(r.Now)}
		if out[i].BreakerOpen {
			out[i].BreakerOpenUntil = r.BreakerOpenUntil
		}
	}
	return out, err
}
