package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/queries"
)

// This file is the only one that touches the generated queries: it turns
// rows into the package's own types.

var errNoHead = errors.New("no audit head")

type store struct{ q *queries.Queries }

func newStore(db DB) store { return store{queries.New(db)} }

// newFilteredStore is a store for the filtered reads (see database.FreshPlans).
func newFilteredStore(db DB) store { return store{queries.New(database.FreshPlans(db))} }

type lockedHead struct {
	Seq        int64
	Hash       []byte
	OccurredAt time.Time
	DetailText string
}

func (s store) lockHead(ctx context.Context, tenantID int64, now *time.Time, detail json.RawMessage) (lockedHead, error) {
	h, err := s.q.AuditHeadLock(ctx, queries.AuditHeadLockParams{Now: now, Detail: detail, TenantID: tenantID})
	if errors.Is(err, pgx.ErrNoRows) {
		return lockedHead{}, errNoHead
	}
	if err != nil {
		return lockedHead{}, err
	}
	return lockedHead(h), nil
}

func (s store) createHead(ctx context.Context, tenantID int64) error {
	return s.q.AuditHeadCreate(ctx, queries.AuditHeadCreateParams{TenantID: tenantID, Genesis: genesisHash})
}

// head returns a tenant's head; a tenant that never recorded has none.
func (s store) head(ctx context.Context, tenantID int64) (seq int64, hash []byte, err error) {
	h, err := s.q.AuditHeadGet(ctx, tenantID)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, errNoHead
	}
	return h.Seq, h.Hash, err
}

func (s store) lockHeads(ctx context.Context, tenantIDs []int64) (map[int64]chainHead, error) {
	rows, err := s.q.AuditHeadLockMany(ctx, tenantIDs)
	if err != nil {
		return nil, err
	}
	m := make(map[int64]chainHead, len(rows))
	for _, r := range rows {
		m[r.TenantID] = chainHead{Seq: r.Seq, Hash: r.Hash}
	}
	return m, nil
}

func (s store) insert(ctx context.Context, r *Recorded) (int64, error) {
	return s.q.AuditEventInsert(ctx, queries.AuditEventInsertParams{
		TenantID:   r.TenantID,
		Seq:        r.Seq,
		ActorKind:  string(r.ActorKind),
		ActorID:    r.ActorID,
		Action:     r.Action,
		Entity:     r.Entity,
		EntityID:   r.EntityID,
		Detail:     r.Detail,
		OccurredAt: r.OccurredAt,
		TraceID:    r.TraceID,
		JobID:      r.JobID,
		PrevHash:   r.PrevHash,
		Hash:       r.Hash,
	})
}

// batch is a column-wise bulk of events for insertBatch.
type batch = queries.AuditEventInsertBatchParams

func (s store) insertBatch(ctx context.Context, b *batch) (int64, error) {
	return s.q.AuditEventInsertBatch(ctx, *b)
}

func (s store) timeline(ctx context.Context, tenantID int64, f Filter, beforeSeq *int64, limit int) ([]Recorded, error) {
	if f.From != nil || f.To != nil {
		return s.timelineByTime(ctx, tenantID, f, beforeSeq, limit)
	}
	rows, err := s.q.AuditEventTimeline(ctx, queries.AuditEventTimelineParams{
		TenantID:  tenantID,
		BeforeSeq: beforeSeq,
		Action:    nonEmpty(f.Action),
		Entity:    nonEmpty(f.Entity),
		EntityID:  nonEmpty(f.EntityID),
		ActorKind: nonEmpty(string(f.ActorKind)),
		ActorID:   f.ActorID,
		TraceID:   nonEmpty(f.TraceID),
		JobID:     f.JobID,
		FromTime:  f.From,
		ToTime:    f.To,
		Lim:       int32(limit),
	})
	if err != nil {
		return nil, err
	}
	return fromRows(rows), nil
}

// timelineByTime is timeline for a date range: newest first by time, so
// the range's own index entries are read however far back it lies.
func (s store) timelineByTime(ctx context.Context, tenantID int64, f Filter, beforeSeq *int64, limit int) ([]Recorded, error) {
	rows, err := s.q.AuditEventTimelineByTime(ctx, queries.AuditEventTimelineByTimeParams{
		TenantID:  tenantID,
		FromTime:  f.From,
		ToTime:    f.To,
		BeforeSeq: beforeSeq,
		Action:    nonEmpty(f.Action),
		Entity:    nonEmpty(f.Entity),
		EntityID:  nonEmpty(f.EntityID),
		ActorKind: nonEmpty(string(f.ActorKind)),
		ActorID:   f.ActorID,
		TraceID:   nonEmpty(f.TraceID),
		JobID:     f.JobID,
		Lim:       int32(limit),
	})
	if err != nil {
		return nil, err
	}
	return fromRows(rows), nil
}

// scanned is a row read for verification or export: the detail as jsonb's
// canonical text, exactly what the hash covers.
type scanned struct {
	chainFields
	ID   int64
	Hash []byte
}

func (s store) chain(ctx context.Context, tenantID int64, afterSeq, throughSeq int64, limit int) ([]scanned, error) {
	rows, err := s.q.AuditEventChain(ctx, queries.AuditEventChainParams{
		TenantID: tenantID, AfterSeq: afterSeq, ThroughSeq: throughSeq, Lim: int32(limit),
	})
	if err != nil {
		return nil, err
	}
	out := make([]scanned, len(rows))
	for i, r := range rows {
		out[i] = toScanned(queries.AuditEventScanRow(r))
	}
	return out, nil
}

func (s store) scan(ctx context.Context, tenantID int64, f Filter, afterSeq, throughSeq int64, limit int) ([]scanned, error) {
	rows, err := s.q.AuditEventScan(ctx, queries.AuditEventScanParams{
		TenantID:   tenantID,
		AfterSeq:   afterSeq,
		ThroughSeq: throughSeq,
		Action:     nonEmpty(f.Action),
		Entity:     nonEmpty(f.Entity),
		EntityID:   nonEmpty(f.EntityID),
		ActorKind:  nonEmpty(string(f.ActorKind)),
		ActorID:    f.ActorID,
		TraceID:    nonEmpty(f.TraceID),
		JobID:      f.JobID,
		FromTime:   f.From,
		ToTime:     f.To,
		Lim:        int32(limit),
	})
	if err != nil {
		return nil, err
	}
	out := make([]scanned, len(rows))
	for i, r := range rows {
		out[i] = toScanned(r)
	}
	return out, nil
}

func toScanned(r queries.AuditEventScanRow) scanned {
	return scanned{
		chainFields: chainFields{
			TenantID:   r.TenantID,
			Seq:        r.Seq,
			ActorKind:  r.ActorKind,
			ActorID:    r.ActorID,
			Action:     r.Action,
			Entity:     r.Entity,
			EntityID:   r.EntityID,
			DetailText: r.DetailText,
			OccurredAt: r.OccurredAt.UTC(),
			TraceID:    r.TraceID,
			JobID:      r.JobID,
			PrevHash:   r.PrevHash,
		},
		ID:   r.ID,
		Hash: r.Hash,
	}
}

func (s store) lastSeq(ctx context.Context, tenantID int64) (int64, error) {
	return s.q.AuditEventLastSeq(ctx, tenantID)
}

func (s store) entityHistory(ctx context.Context, tenantID int64, entity, entityID string, limit int) ([]Recorded, error) {
	rows, err := s.q.AuditEventEntityHistory(ctx, queries.AuditEventEntityHistoryParams{
		TenantID: tenantID, Entity: entity, EntityID: entityID, Lim: int32(limit),
	})
	if err != nil {
		return nil, err
	}
	return fromRows(rows), nil
}

func (s store) search(ctx context.Context, q SearchQuery, beforeID *int64, limit int) ([]Recorded, error) {
	rows, err := s.q.AuditEventSearch(ctx, queries.AuditEventSearchParams{
		TraceID:  nonEmpty(q.TraceID),
		JobID:    q.JobID,
		TenantID: q.TenantID,
		BeforeID: beforeID,
		Lim:      int32(limit),
	})
	if err != nil {
		return nil, err
	}
	return fromRows(rows), nil
}

func (s store) tenantIDs(ctx context.Context) ([]int64, error) {
	return s.q.AuditTenantIDs(ctx)
}

// seedActors returns each tenant's member user ids and the staff user ids.
func (s store) seedActors(ctx context.Context, tenantIDs []int64) (map[int64][]int64, []int64, error) {
	rows, err := s.q.AuditSeedMembers(ctx, tenantIDs)
	if err != nil {
		return nil, nil, err
	}
	members := map[int64][]int64{}
	for _, r := range rows {
		members[r.TenantID] = append(members[r.TenantID], r.UserID)
	}
	staff, err := s.q.AuditSeedStaff(ctx)
	return members, staff, err
}

func (s store) analyze(ctx context.Context) error { return s.q.AuditAnalyze(ctx) }

func fromRows(rows []queries.AuditEvent) []Recorded {
	out := make([]Recorded, len(rows))
	for i, r := range rows {
		out[i] = Recorded{
			Event: Event{
				TenantID:  r.TenantID,
				ActorKind: ActorKind(r.ActorKind),
				ActorID:   r.ActorID,
				Action:    r.Action,
				Entity:    r.Entity,
				EntityID:  r.EntityID,
				Detail:    r.Detail,
				TraceID:   r.TraceID,
				JobID:     r.JobID,
			},
			Seq:        r.Seq,
			ID:         r.ID,
			OccurredAt: r.OccurredAt.UTC(),
			Hash:       r.Hash,
			PrevHash:   r.PrevHash,
		}
	}
	return out
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func wrapf(err error, format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, err)...)
}
