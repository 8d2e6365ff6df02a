package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/jejakhq/jejak/internal/queries"
)

// This file is the only one in the package that touches sqlc's types.

func storeInsert(ctx context.Context, db queries.DBTX, now *time.Time, tenantID int64, m Message, payload json.RawMessage) (int64, error) {
	return queries.New(db).OutboxInsert(ctx, queries.OutboxInsertParams{
		TenantID: tenantID, EventType: m.Type, AggregateType: m.AggregateType, AggregateID: m.AggregateID,
		Payload: payload, TraceID: m.TraceID, RequestedBy: m.RequestedBy, Now: now,
	})
}

func storeInsertMany(ctx context.Context, db queries.DBTX, now *time.Time, tenantID int64, ms []Message, payloads []json.RawMessage) error {
	p := queries.OutboxInsertManyParams{TenantID: tenantID, Now: now, RequestedBys: make([]int64, len(ms))}
	for i, m := range ms {
		if m.RequestedBy != nil {
			p.RequestedBys[i] = *m.RequestedBy // 0: none
		}
		p.EventTypes = append(p.EventTypes, m.Type)
		p.AggregateTypes = append(p.AggregateTypes, m.AggregateType)
		p.AggregateIds = append(p.AggregateIds, m.AggregateID)
		p.Payloads = append(p.Payloads, string(payloads[i]))
		p.TraceIds = append(p.TraceIds, m.TraceID)
	}
	return queries.New(db).OutboxInsertMany(ctx, p)
}

func storeClaim(ctx context.Context, db queries.DBTX, now *time.Time, worker string, n int) ([]Envelope, error) {
	rows, err := queries.New(db).OutboxClaim(ctx, queries.OutboxClaimParams{Worker: worker, Now: now, Lim: int32(n)})
	if err != nil {
		return nil, err
	}
	out := make([]Envelope, len(rows))
	for i, r := range rows {
		out[i] = Envelope{ID: r.ID, TenantID: r.TenantID, TenantSlug: r.Slug, Type: r.EventType,
			AggregateType: r.AggregateType, AggregateID: r.AggregateID, Payload: r.Payload,
			TraceID: r.TraceID, RequestedBy: r.RequestedBy, CreatedAt: r.CreatedAt, Attempt: int(r.Attempts)}
	}
	// In id order, which within an aggregate is its order (UPDATE …
	// RETURNING gives rows in no promised order).
	slices.SortFunc(out, func(a, b Envelope) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// msgKeys are claimed messages by primary key (tenant, id), in two
// parallel arrays as the settling statements take them.
type msgKeys struct{ tenantIDs, ids []int64 }

func (k *msgKeys) add(m Envelope) {
	k.tenantIDs, k.ids = append(k.tenantIDs, m.TenantID), append(k.ids, m.ID)
}

func storeMarkDelivered(ctx context.Context, db queries.DBTX, now *time.Time, worker string, k msgKeys) (int64, error) {
	return queries.New(db).OutboxMarkDelivered(ctx, queries.OutboxMarkDeliveredParams{
		Now: now, TenantIds: k.tenantIDs, Ids: k.ids, Worker: worker})
}

// storeMarkFailed returns how many of the messages ended failed (out of
// attempts).
func storeMarkFailed(ctx context.Context, db queries.DBTX, now *time.Time, worker string, maxAttempts int,
	k msgKeys, errs []string, delays []float64) (int, error) {
	rows, err := queries.New(db).OutboxMarkFailed(ctx, queries.OutboxMarkFailedParams{
		MaxAttempts: int32(maxAttempts), Now: now, Worker: worker, TenantIds: k.tenantIDs, Ids: k.ids,
		Errors: errs, Delays: delays,
	})
	n := 0
	for _, r := range rows {
		if r.State == string(StateFailed) {
			n++
		}
	}
	return n, err
}

func storeRelease(ctx context.Context, db queries.DBTX, worker string, k msgKeys) (int64, error) {
	return queries.New(db).OutboxRelease(ctx, queries.OutboxReleaseParams{TenantIds: k.tenantIDs, Ids: k.ids, Worker: worker})
}

func storeReclaim(ctx context.Context, db queries.DBTX, now *time.Time, olderThan time.Duration) (int64, error) {
	return queries.New(db).OutboxReclaim(ctx, queries.OutboxReclaimParams{Now: now, OlderThanSeconds: olderThan.Seconds()})
}

func storePrune(ctx context.Context, db queries.DBTX, now *time.Time, olderThan time.Duration, n int) (int64, error) {
	return queries.New(db).OutboxPrune(ctx, queries.OutboxPruneParams{Now: now, OlderThanSeconds: olderThan.Seconds(), Lim: int32(n)})
}

func storeStatsAdd(ctx context.Context, db queries.DBTX, now *time.Time, delivered, failed int) error {
	return queries.New(db).OutboxStatsAdd(ctx, queries.OutboxStatsAddParams{Now: now, Delivered: int64(delivered), Failed: int64(failed)})
}

func storeStatsPrune(ctx context.Context, db queries.DBTX, now *time.Time, olderThan time.Duration) (int64, error) {
	return queries.New(db).OutboxStatsPrune(ctx, queries.OutboxStatsPruneParams{Now: now, OlderThanSeconds: olderThan.Seconds()})
}
