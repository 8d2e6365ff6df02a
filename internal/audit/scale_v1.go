package audit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
)

// SeedV1 writes n audit events in the v1 form, hash chains (seq, prev_hash,
// hash, each tenant's head moved by the v1 trigger), spread evenly over
// tenants, as a database held them before the log: for measuring the
// migration into the log at scale. db is a superuser connection to a
// database at the last v1 schema (migration 97) whose tenants each have
// their empty head.
func SeedV1(ctx context.Context, db database.Beginner, tenants []int64, n int, progress func(done int64)) error {
	const batch = 5000
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var done int64
	for ti, tenant := range tenants {
		quota := n / len(tenants)
		if ti < n%len(tenants) {
			quota++
		}
		prev := genesisHash
		for seq := int64(1); seq <= int64(quota); {
			size := min(int64(batch), int64(quota)-seq+1)
			seqs := make([]int64, 0, size)
			ids := make([]string, 0, size)
			times := make([]time.Time, 0, size)
			prevs := make([][]byte, 0, size)
			hashes := make([][]byte, 0, size)
			for i := int64(0); i < size; i++ {
				at = at.Add(time.Second)
				f := chainFields{TenantID: tenant, Seq: seq + i, ActorKind: string(ActorSystem), Action: "report.sent",
					Entity: "report", EntityID: strconv.FormatInt(seq+i, 10), DetailText: "{}", OccurredAt: at, PrevHash: prev, V1: true}
				h := eventHash(&f)
				seqs, ids, times, prevs, hashes = append(seqs, f.Seq), append(ids, f.EntityID), append(times, at), append(prevs, prev), append(hashes, h)
				prev = h
			}
			err := database.InTx(ctx, db, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `INSERT INTO audit_events (tenant_id, seq, actor_kind, action, entity, entity_id,
					detail, occurred_at, trace_id, prev_hash, hash)
					SELECT $1, s, 'system', 'report.sent', 'report', e, '{}'::jsonb, t, '', p, h
					FROM unnest($2::bigint[], $3::text[], $4::timestamptz[], $5::bytea[], $6::bytea[]) AS x(s, e, t, p, h)
					ORDER BY s`, tenant, seqs, ids, times, prevs, hashes)
				return err
			})
			if err != nil {
				return fmt.Errorf("seed v1 events %d.. of tenant %d: %w", seq, tenant, err)
			}
			seq += size
			done += size
			if progress != nil {
				progress(done)
			}
		}
	}
	return nil
}
