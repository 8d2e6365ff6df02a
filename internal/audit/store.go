package audit

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/queries"
)

// This file and log_store.go are the only ones that touch the generated
// queries: they turn rows into the package's own types.

type store struct{ q *queries.Queries }

func newStore(db DB) store { return store{queries.New(db)} }

// newFilteredStore is a store for the filtered reads (see database.FreshPlans).
func newFilteredStore(db DB) store { return store{queries.New(database.FreshPlans(db))} }

// batch is a column-wise bulk of events for insertBatch.
type batch = queries.AuditEventInsertBatchParams

func (s store) insertBatch(ctx context.Context, b *batch) (int64, error) {
	return s.q.AuditEventInsertBatch(ctx, *b)
}

func (s store) timeline(ctx context.Context, tenantID int64, f Filter, beforeID *int64, limit int) ([]Recorded, error) {
	if f.Search != "" {
		return s.timelineSearch(ctx, tenantID, f, beforeID, limit)
	}
	if f.From != nil || f.To != nil {
		return s.timelineByTime(ctx, tenantID, f, beforeID, limit)
	}
	rows, err := s.q.AuditEventTimeline(ctx, queries.AuditEventTimelineParams{
		TenantID:  tenantID,
		BeforeID:  beforeID,
		Action:    nonEmpty(f.Action),
		Actions:   f.Actions,
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
	return fromRows(rows), err
}

// timelineAll is timeline without filters, on its own prepared statement
// (s must not be a filtered store, whose statements are planned per call).
func (s store) timelineAll(ctx context.Context, tenantID int64, beforeID *int64, limit int) ([]Recorded, error) {
	before := int64(math.MaxInt64)
	if beforeID != nil {
		before = *beforeID
	}
	rows, err := s.q.AuditEventTimelineAll(ctx, queries.AuditEventTimelineAllParams{TenantID: tenantID, BeforeID: before, Lim: int32(limit)})
	return fromRows(rows), err
}

// timelineChanged is what changed on a newest page kept since tree size
// sinceSize, from event fromID on (AuditEventTimelineChanged), newest
// first.
func (s store) timelineChanged(ctx context.Context, tenantID, fromID, sinceSize int64, limit int) ([]Recorded, error) {
	rows, err := s.q.AuditEventTimelineChanged(ctx, queries.AuditEventTimelineChangedParams{
		TenantID: tenantID, FromID: fromID, SinceSize: sinceSize, Lim: int32(limit),
	})
	return fromRows(rows), err
}

// timelineByTime is timeline for a date range: newest first by time, so
// the range's own index entries are read however far back it lies.
func (s store) timelineByTime(ctx context.Context, tenantID int64, f Filter, beforeID *int64, limit int) ([]Recorded, error) {
	rows, err := s.q.AuditEventTimelineByTime(ctx, queries.AuditEventTimelineByTimeParams{
		TenantID:  tenantID,
		FromTime:  f.From,
		ToTime:    f.To,
		BeforeID:  beforeID,
		Action:    nonEmpty(f.Action),
		Actions:   f.Actions,
		Entity:    nonEmpty(f.Entity),
		EntityID:  nonEmpty(f.EntityID),
		ActorKind: nonEmpty(string(f.ActorKind)),
		ActorID:   f.ActorID,
		TraceID:   nonEmpty(f.TraceID),
		JobID:     f.JobID,
		Lim:       int32(limit),
	})
	return fromRows(rows), err
}

// timelineSearch is timeline with a name search, newest first by id (a
// date range narrows it rather than ordering it by time).
func (s store) timelineSearch(ctx context.Context, tenantID int64, f Filter, beforeID *int64, limit int) ([]Recorded, error) {
	rows, err := s.q.AuditEventTimelineSearch(ctx, queries.AuditEventTimelineSearchParams{
		TenantID:  tenantID,
		Search:    *likePattern(f.Search),
		BeforeID:  beforeID,
		Lim:       int32(limit),
		Actions:   f.Actions,
		Action:    nonEmpty(f.Action),
		Entity:    nonEmpty(f.Entity),
		EntityID:  nonEmpty(f.EntityID),
		ActorKind: nonEmpty(string(f.ActorKind)),
		ActorID:   f.ActorID,
		TraceID:   nonEmpty(f.TraceID),
		JobID:     f.JobID,
		FromTime:  f.From,
		ToTime:    f.To,
	})
	return fromRows(rows), err
}

func (s store) newer(ctx context.Context, tenantID int64, f Filter, afterID, throughID int64, limit int) ([]Recorded, error) {
	rows, err := s.q.AuditEventNewer(ctx, queries.AuditEventNewerParams{
		TenantID:  tenantID,
		AfterID:   afterID,
		ThroughID: throughID,
		Action:    nonEmpty(f.Action),
		Actions:   f.Actions,
		Search:    likePattern(f.Search),
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
	return fromRows(rows), err
}

func (s store) lastID(ctx context.Context, tenantID int64) (int64, error) {
	return s.q.AuditEventLastID(ctx, tenantID)
}

func (s store) timelineVersion(ctx context.Context, tenantID int64) (timelineVersion, error) {
	v, err := s.q.AuditTimelineVersion(ctx, tenantID)
	return timelineVersion{size: v.Size, unsealed: v.Unsealed}, err
}

func (s store) entityHistory(ctx context.Context, tenantID int64, entity, entityID, name string, limit int) ([]Recorded, error) {
	rows, err := s.q.AuditEventEntityHistory(ctx, queries.AuditEventEntityHistoryParams{
		TenantID: tenantID, Entity: entity, EntityID: entityID, Name: name, Lim: int32(limit),
	})
	return fromRows(rows), err
}

func (s store) entityName(ctx context.Context, tenantID int64, entity, entityID string) (string, error) {
	return s.q.AuditEventEntityName(ctx, queries.AuditEventEntityNameParams{TenantID: tenantID, Entity: entity, EntityID: entityID})
}

func (s store) search(ctx context.Context, q SearchQuery, beforeID *int64, limit int) ([]Recorded, error) {
	rows, err := s.q.AuditEventSearch(ctx, queries.AuditEventSearchParams{
		TraceID:  nonEmpty(q.TraceID),
		JobID:    q.JobID,
		TenantID: q.TenantID,
		BeforeID: beforeID,
		Lim:      int32(limit),
	})
	return fromRows(rows), err
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

// leaf is one leaf of a tenant's tree with its event as stored (Present
// false when the event row is gone).
type leaf struct {
	chainFields
	EventID int64
	Present bool
	Hashes  []byte // the stored hashes, leaf hash first
	V1Hash  []byte // a migrated v1 event's chain hash
}

// entry is the leaf's canonical encoding, recomputed from its event.
func (l *leaf) entry() []byte { return l.encode() }

func (s store) leaves(ctx context.Context, tenantID, afterSeq, throughSeq int64, limit int) ([]leaf, error) {
	rows, err := s.q.AuditLeafScan(ctx, queries.AuditLeafScanParams{
		TenantID: tenantID, AfterSeq: afterSeq, ThroughSeq: throughSeq, Lim: int32(limit),
	})
	if err != nil {
		return nil, err
	}
	out := make([]leaf, len(rows))
	for i, r := range rows {
		out[i] = leaf{
			chainFields: chainFields{
				TenantID: tenantID, Seq: r.Seq, ID: r.EventID, ActorKind: r.ActorKind, ActorID: r.ActorID,
				Action: r.Action, Entity: r.Entity, EntityID: r.EntityID, DetailText: r.DetailText,
				OccurredAt: r.OccurredAt.UTC(), TraceID: r.TraceID, JobID: r.JobID,
				PrevHash: r.PrevHash, V1: r.V1Seq > 0,
			},
			EventID: r.EventID, Present: r.Present, Hashes: r.Hashes, V1Hash: r.Hash,
		}
	}
	return out, nil
}

// eventRow is the shape of every read that returns events with their leaf
// and the names of the people in them.
type eventRow interface {
	~struct {
		AuditEvent     queries.AuditEvent
		LeafSeq        int64
		ActorName      string
		ActorRole      string
		EntityUserName string
	}
}

func fromRows[R eventRow](rows []R) []Recorded {
	out := make([]Recorded, len(rows))
	for i, row := range rows {
		r := struct {
			AuditEvent     queries.AuditEvent
			LeafSeq        int64
			ActorName      string
			ActorRole      string
			EntityUserName string
		}(row)
		e := r.AuditEvent
		out[i] = Recorded{
			Event: Event{
				TenantID:  e.TenantID,
				ActorKind: ActorKind(e.ActorKind),
				ActorID:   e.ActorID,
				Action:    e.Action,
				Entity:    e.Entity,
				EntityID:  e.EntityID,
				Detail:    e.Detail,
				TraceID:   e.TraceID,
				JobID:     e.JobID,
			},
			Seq:            r.LeafSeq,
			ID:             e.ID,
			OccurredAt:     e.OccurredAt.UTC(),
			ActorName:      r.ActorName,
			ActorRole:      r.ActorRole,
			EntityUserName: r.EntityUserName,
		}
	}
	return out
}

// likeEscaper escapes LIKE's wildcards and its escape character, so a
// search for "50%" finds the text "50%".
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// likePattern is a search term as a LIKE pattern matching it anywhere; nil
// for no search. The term is already lower-case (CheckSearch).
func likePattern(term string) *string {
	if term == "" {
		return nil
	}
	p := "%" + likeEscaper.Replace(term) + "%"
	return &p
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
