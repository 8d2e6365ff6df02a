package audit

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/ptr"
	"github.com/jejakhq/jejak/internal/queries"
)

// The log's tables (audit_unsealed, audit_leaves, audit_trees,
// audit_checkpoints) as the sealer, the verifier and the proofs read and
// write them.

// logTree is a tenant's tree row. The sealer's locked read also fills
// SignedAt, Now (the database's clock), Slug, TimeZone and V1Size (the
// length of the tenant's v1 chain, integrated first).
type logTree struct {
	Size       int64
	Root       []byte
	SignedSize int64
	SignedAt   time.Time
	Now        time.Time
	Slug       string
	TimeZone   string
	V1Size     int64
}

// tree reads tenantID's tree; a tenant never sealed has the empty tree.
func (s store) tree(ctx context.Context, tenantID int64) (logTree, error) {
	t, err := s.q.AuditTreeGet(ctx, tenantID)
	if errors.Is(err, pgx.ErrNoRows) {
		return logTree{}, nil
	}
	return logTree{Size: t.Size, Root: t.Root, SignedSize: t.SignedSize}, err
}

// lockTree locks tenantID's tree row with SKIP LOCKED; ok is false when
// the row is missing or another transaction holds it.
func (s store) lockTree(ctx context.Context, tenantID int64) (t logTree, ok bool, err error) {
	r, err := s.q.AuditTreeLock(ctx, tenantID)
	if errors.Is(err, pgx.ErrNoRows) {
		return logTree{}, false, nil
	}
	return logTree(r), err == nil, err
}

func (s store) createTree(ctx context.Context, tenantID int64, emptyRoot []byte) error {
	return s.q.AuditTreeCreate(ctx, queries.AuditTreeCreateParams{TenantID: tenantID, Root: emptyRoot})
}

// latestCheckpoint is tenantID's newest checkpoint; ok is false for none.
func (s store) latestCheckpoint(ctx context.Context, tenantID int64) (SignedTree, bool, error) {
	r, err := s.q.AuditCheckpointLatest(ctx, tenantID)
	if errors.Is(err, pgx.ErrNoRows) {
		return SignedTree{}, false, nil
	}
	return SignedTree(r), err == nil, err
}

// newestCheckpoint is the checkpoint signed last, of any tenant; ok is
// false when there is none.
func (s store) newestCheckpoint(ctx context.Context) (tenantID, size int64, signed string, ok bool, err error) {
	r, err := s.q.AuditCheckpointNewest(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, "", false, nil
	}
	return r.TenantID, r.Size, r.Note, err == nil, err
}

// claimKey returns the database's log key, claiming vkey when none is.
// A claim another sealer commits while this statement runs is not in its
// snapshot: the statement then finds nothing, and a second one sees it.
func (s store) claimKey(ctx context.Context, vkey string) (string, error) {
	for range 2 {
		k, err := s.q.AuditLogKeyClaim(ctx, vkey)
		if !errors.Is(err, pgx.ErrNoRows) {
			return k, err
		}
	}
	return "", errors.New("claim the audit log key: no key claimed and none found")
}

// checkpoints are all of tenantID's checkpoints, smallest tree first.
func (s store) checkpoints(ctx context.Context, tenantID int64) ([]SignedTree, error) {
	rows, err := s.q.AuditCheckpointsAll(ctx, tenantID)
	out := make([]SignedTree, len(rows))
	for i, r := range rows {
		out[i] = SignedTree(r)
	}
	return out, err
}

// sealTarget is a tenant the sealer has work for, and whether its tree
// exists yet.
type sealTarget = queries.AuditSealWorkRow

// sealWork lists the tenants with queued events or unsigned growth, in id
// order: those of slot sl, and the others' whose first queued event has
// waited stealAfter.
func (s store) sealWork(ctx context.Context, sl slot, stealAfter time.Duration) ([]sealTarget, error) {
	return s.q.AuditSealWork(ctx, queries.AuditSealWorkParams{Members: int32(sl.members), Rank: int32(sl.rank),
		StealAfter: stealAfter.Seconds()})
}

// v1Batch reads up to limit migrated v1 events after seq afterSeq, in seq
// order, with each event's v1 seq.
func (s store) v1Batch(ctx context.Context, tenantID, afterSeq int64, limit int) ([]sealable, []int64, error) {
	rows, err := s.q.AuditV1Batch(ctx, queries.AuditV1BatchParams{TenantID: tenantID, AfterSeq: &afterSeq, Lim: int32(limit)})
	out := make([]sealable, len(rows))
	seqs := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = batchRow(queries.AuditUnsealedBatchRow(r), true)
		if r.Seq != nil {
			seqs[i] = *r.Seq
		}
	}
	return out, seqs, err
}

// unsealedBatch reads up to limit of tenantID's queued events in id order,
// and the stored hashes of the leaves whose seqs are in edge, by seq.
func (s store) unsealedBatch(ctx context.Context, tenantID int64, limit int, edge []int64) ([]sealable, map[int64][]byte, error) {
	rows, err := s.q.AuditUnsealedBatch(ctx, queries.AuditUnsealedBatchParams{TenantID: tenantID, Lim: int32(limit), Edge: edge})
	out := make([]sealable, 0, len(rows))
	hashes := map[int64][]byte{}
	for _, r := range rows {
		if r.Hashes != nil {
			hashes[*r.Seq] = r.Hashes
			continue
		}
		out = append(out, batchRow(r, false))
	}
	return out, hashes, err
}

// batchRow is one event of either batch (the two queries share their
// columns) as the sealer takes it.
func batchRow(r queries.AuditUnsealedBatchRow, v1 bool) sealable {
	return sealable{queuedAt: r.QueuedAt, fields: chainFields{
		TenantID: r.TenantID, ID: r.ID, ActorKind: r.ActorKind, ActorID: r.ActorID,
		Action: r.Action, Entity: r.Entity, EntityID: r.EntityID, DetailText: r.DetailText,
		OccurredAt: r.OccurredAt.UTC(), TraceID: r.TraceID, JobID: r.JobID,
		PrevHash: r.PrevHash, V1: v1,
	}}
}

// sealWrite is what one sealer transaction writes (AuditSealBatch): the
// batch's leaves, the queued events among them, the tree's new size and
// root, and a signed note of it (empty: not signed now).
type sealWrite = queries.AuditSealBatchParams

// seal writes a sealer's batch in one statement, which fails unless every
// queued event of the batch moved to audit_sealed.
func (s store) seal(ctx context.Context, w sealWrite) error {
	return s.q.AuditSealBatch(ctx, w)
}

// searchWork lists the tenants whose tree has grown past the name
// search's index, with the first leaf past it sealed minWait ago or more
// (minWait and stealAfter for the tenants not of slot sl).
func (s store) searchWork(ctx context.Context, minWait time.Duration, sl slot, stealAfter time.Duration) ([]int64, error) {
	return s.q.AuditSearchWork(ctx, queries.AuditSearchWorkParams{MinWait: minWait.Seconds(),
		Members: int32(sl.members), Rank: int32(sl.rank), StealAfter: stealAfter.Seconds()})
}

// unindexed counts the sealed events the name search's index does not
// cover yet, all tenants.
func (s store) unindexed(ctx context.Context) (int64, error) {
	return s.q.AuditUnindexedCount(ctx)
}

// indexNext indexes up to lim of tenantID's leaves after the index's head
// for the name search and returns how many it covered (0 when another
// indexer holds the head).
func (s store) indexNext(ctx context.Context, tenantID int64, lim int) (int, error) {
	n, err := s.q.AuditSearchIndex(ctx, queries.AuditSearchIndexParams{TenantID: tenantID, Lim: int32(lim)})
	return int(n), err
}

// leafHashes reads the stored hashes of the given leaves.
func (s store) leafHashes(ctx context.Context, tenantID int64, seqs []int64) (map[int64][]byte, error) {
	rows, err := s.q.AuditLeafHashes(ctx, queries.AuditLeafHashesParams{TenantID: tenantID, Seqs: seqs})
	out := make(map[int64][]byte, len(rows))
	for _, r := range rows {
		out[r.Seq] = r.Hashes
	}
	return out, err
}

func (s store) lastLeaf(ctx context.Context, tenantID int64) (int64, error) {
	return s.q.AuditLastLeaf(ctx, tenantID)
}

// orphans counts events in audit_sealed that are no leaf of the log.
func (s store) orphans(ctx context.Context, tenantID int64) (int64, error) {
	return s.q.AuditUnsealedOrphans(ctx, tenantID)
}

func (s store) backlogs(ctx context.Context) ([]Backlog, error) {
	rows, err := s.q.AuditUnsealedStats(ctx)
	out := make([]Backlog, len(rows))
	for i, r := range rows {
		out[i] = Backlog(r)
	}
	return out, err
}

// insertParams are the columns of one event as it is written.
func insertParams(e *Event, detail []byte, now *time.Time) queries.AuditEventInsertParams {
	return queries.AuditEventInsertParams{
		TenantID:  e.TenantID,
		ActorKind: string(e.ActorKind),
		ActorID:   e.ActorID,
		Action:    e.Action,
		Entity:    e.Entity,
		EntityID:  e.EntityID,
		Detail:    detail,
		Now:       now,
		TraceID:   e.TraceID,
		JobID:     e.JobID,
	}
}

// appendMany writes events with one statement, all at time now (nil: the
// database's now()).
func (s store) appendMany(ctx context.Context, events []Event, details [][]byte, now *time.Time) error {
	if len(events) == 1 {
		return s.q.AuditEventAppendOne(ctx, queries.AuditEventAppendOneParams(insertParams(&events[0], details[0], now)))
	}
	p := queries.AuditEventAppendManyParams{Now: now}
	for i, e := range events {
		p.TenantIds = append(p.TenantIds, e.TenantID)
		p.ActorKinds = append(p.ActorKinds, string(e.ActorKind))
		p.ActorIds = append(p.ActorIds, ptr.Value(e.ActorID))
		p.Actions = append(p.Actions, e.Action)
		p.Entities = append(p.Entities, e.Entity)
		p.EntityIds = append(p.EntityIds, e.EntityID)
		p.Details = append(p.Details, string(details[i]))
		p.TraceIds = append(p.TraceIds, e.TraceID)
		p.JobIds = append(p.JobIds, ptr.Value(e.JobID))
	}
	return s.q.AuditEventAppendMany(ctx, p)
}

// insert writes one event and returns it as stored.
func (s store) insert(ctx context.Context, e *Event, detail []byte, now *time.Time) (Recorded, error) {
	row, err := s.q.AuditEventInsert(ctx, insertParams(e, detail, now))
	if err != nil {
		return Recorded{}, err
	}
	rec := Recorded{Event: *e, ID: row.ID, OccurredAt: row.OccurredAt.UTC()}
	rec.Detail = json.RawMessage(row.DetailText)
	return rec, nil
}
