package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
)

// VerifyResult is the outcome of checking one tenant's chain.
type VerifyResult struct {
	TenantID int64
	// OK is true when every event from 1 to the head is present, unaltered
	// and in order, and the head matches the last event.
	OK bool
	// CheckedThrough is the last sequence number found intact.
	CheckedThrough int64
	// FirstBadSeq is the first sequence number that is missing, altered or
	// out of place (0 when OK).
	FirstBadSeq int64
	// Reason says what is wrong at FirstBadSeq ("" when OK).
	Reason string
	// HeadSeq and HeadHash are the tenant's head as stored: export them to
	// anchor the chain outside the database (docs/audit.md).
	HeadSeq  int64
	HeadHash []byte
}

// verifyBatch is how many events Verify holds in memory at once.
const verifyBatch = 5000

// Verify walks tenantID's chain in sequence order, in batches, recomputing
// every hash, and reports the first broken sequence number. It reads in one
// REPEATABLE READ snapshot so concurrent appends do not disturb it; db is
// the app pool (scoped to tenantID here) or the system pool. The error is
// for failures to read, not for a broken chain.
func Verify(ctx context.Context, db TxBeginner, tenantID int64) (VerifyResult, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return VerifyResult{}, wrapf(err, "begin audit verification of tenant %d", tenantID)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only
	if err := database.ScopeTx(ctx, tx, tenantID); err != nil {
		return VerifyResult{}, wrapf(err, "scope audit verification to tenant %d", tenantID)
	}
	return verifyTx(ctx, tx, tenantID)
}

func verifyTx(ctx context.Context, db DB, tenantID int64) (VerifyResult, error) {
	s := newStore(db)
	res := VerifyResult{TenantID: tenantID}
	bad := func(seq int64, format string, args ...any) (VerifyResult, error) {
		res.OK, res.FirstBadSeq, res.Reason = false, seq, fmt.Sprintf(format, args...)
		return res, nil
	}

	headSeq, headHash, err := s.head(ctx, tenantID)
	noHead := errors.Is(err, errNoHead)
	if err != nil && !noHead {
		return res, wrapf(err, "read audit head of tenant %d", tenantID)
	}
	last, err := s.lastSeq(ctx, tenantID)
	if err != nil {
		return res, wrapf(err, "read last audit seq of tenant %d", tenantID)
	}
	if noHead {
		if last > 0 {
			return bad(1, "events exist (up to seq %d) but the tenant's head row is missing", last)
		}
		res.OK = true
		return res, nil
	}
	res.HeadSeq, res.HeadHash = headSeq, headHash

	prev := genesisHash
	want := int64(1)
	// through is max(head, last) so rows beyond the head are checked too.
	through := max(headSeq, last)
	for want <= through {
		rows, err := s.chain(ctx, tenantID, want-1, through, verifyBatch)
		if err != nil {
			return res, wrapf(err, "read audit events of tenant %d after seq %d", tenantID, want-1)
		}
		if len(rows) == 0 {
			break
		}
		for i := range rows {
			r := &rows[i]
			switch {
			case r.Seq != want:
				return bad(want, "event %d is missing (next stored event is %d)", want, r.Seq)
			case !bytes.Equal(r.PrevHash, prev):
				return bad(want, "event %d does not link to event %d (deleted, inserted or reordered events)", want, want-1)
			case !bytes.Equal(eventHash(&r.chainFields), r.Hash):
				return bad(want, "event %d was altered after it was recorded (hash mismatch)", want)
			}
			res.CheckedThrough = want
			prev = r.Hash
			want++
		}
	}
	switch {
	case res.CheckedThrough < headSeq:
		return bad(res.CheckedThrough+1, "events %d to %d are missing (the head says %d)", res.CheckedThrough+1, headSeq, headSeq)
	case res.CheckedThrough > headSeq:
		return bad(headSeq+1, "events %d to %d lie beyond the head (%d)", headSeq+1, res.CheckedThrough, headSeq)
	case !bytes.Equal(prev, headHash):
		return bad(headSeq, "the head's hash does not match event %d", headSeq)
	}
	res.OK = true
	return res, nil
}

// VerifyAll verifies every tenant's chain through the system pool, one
// snapshot per tenant, and returns one result per tenant in id order.
func VerifyAll(ctx context.Context, system interface {
	TxBeginner
	DB
}) ([]VerifyResult, error) {
	ids, err := newStore(system).tenantIDs(ctx)
	if err != nil {
		return nil, wrapf(err, "list tenants to verify")
	}
	out := make([]VerifyResult, 0, len(ids))
	for _, id := range ids {
		r, err := Verify(ctx, system, id)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}
