package audit

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
)

// Verifier is chain verification for the dashboard: a full verification
// reads a tenant's whole trail, so it runs at most once at a time per
// tenant (callers arriving meanwhile share its result), and its result is
// kept by the head it verified, so asking again costs one head read until
// the head moves.
type Verifier struct {
	db   Pool
	mu   sync.Mutex
	last map[int64]VerifyResult
	busy map[int64]*verifyCall
	runs atomic.Int64
}

// Pool is what the Verifier needs: transactions with options (Verify's
// snapshot) and plain ones (the head read).
type Pool interface {
	TxBeginner
	database.Beginner
}

type verifyCall struct {
	done chan struct{}
	res  VerifyResult
	err  error
}

// NewVerifier returns a Verifier reading through db (the tenant pool).
func NewVerifier(db Pool) *Verifier {
	return &Verifier{db: db, last: map[int64]VerifyResult{}, busy: map[int64]*verifyCall{}}
}

// Runs is how many full verifications have run.
func (v *Verifier) Runs() int64 { return v.runs.Load() }

// Verify returns tenantID's verification result, from the cache when the
// head has not moved since it was computed.
func (v *Verifier) Verify(ctx context.Context, tenantID int64) (VerifyResult, error) {
	var seq int64
	var hash []byte
	err := database.InTenantTx(ctx, v.db, tenantID, func(tx pgx.Tx) (err error) {
		seq, hash, err = newStore(tx).head(ctx, tenantID)
		if errors.Is(err, errNoHead) {
			seq, hash, err = 0, nil, nil
		}
		return err
	})
	if err != nil {
		return VerifyResult{}, wrapf(err, "read audit head of tenant %d", tenantID)
	}
	v.mu.Lock()
	if r, ok := v.last[tenantID]; ok && r.HeadSeq == seq && bytes.Equal(r.HeadHash, hash) {
		v.mu.Unlock()
		return r, nil
	}
	call, running := v.busy[tenantID]
	if !running {
		call = &verifyCall{done: make(chan struct{})}
		v.busy[tenantID] = call
	}
	v.mu.Unlock()
	if !running {
		// Detached from this request: the others waiting on it must not
		// fail because the first caller went away.
		go v.run(context.WithoutCancel(ctx), tenantID, call)
	}
	select {
	case <-call.done:
		return call.res, call.err
	case <-ctx.Done():
		return VerifyResult{}, ctx.Err()
	}
}

func (v *Verifier) run(ctx context.Context, tenantID int64, call *verifyCall) {
	v.runs.Add(1)
	call.res, call.err = Verify(ctx, v.db, tenantID)
	v.mu.Lock()
	delete(v.busy, tenantID)
	if call.err == nil {
		v.last[tenantID] = call.res
	}
	v.mu.Unlock()
	close(call.done)
}
