package audit

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/database"
)

// Verifier is log verification for the dashboard: a full verification
// reads a tenant's whole trail, so it runs at most once at a time per
// tenant (callers arriving meanwhile share its result), and its result is
// kept by the tree it verified, so asking again costs one read of the
// tree row until the tree grows. The once-at-a-time guard holds across replicas too: the
// verification transaction takes a per-tenant advisory lock, and a replica
// finding it held answers ErrVerifyBusy instead of walking the same trail
// again. The cache itself is per replica.
type Verifier struct {
	db   Pool
	mu   sync.Mutex
	last map[int64]VerifyResult
	busy map[int64]*verifyCall
	runs atomic.Int64
	// verifierKey checks the checkpoints' signatures ("" skips that).
	verifierKey string
	// walking, when set, is called with the lock held just before the
	// chain walk (tests block here to hold the lock).
	walking func(tenantID int64)
}

// verifyLockNamespace is the first key of the two-int advisory lock held
// while a Verifier walks a tenant's chain (the second is a hash of the
// tenant id). Other advisory locks in the repo use 727274..727276,
// 727278, 727279 and hashtext('demo-history').
const verifyLockNamespace = 727277

// ErrVerifyBusy is returned when another replica is verifying the same
// tenant's chain right now; the dashboard shows it as a conflict.
var ErrVerifyBusy = apperr.Conflict("The log of this tenant is being verified right now; try again in a moment.")

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

// Runs is how many full chain walks this Verifier has run.
func (v *Verifier) Runs() int64 { return v.runs.Load() }

// Verify returns tenantID's verification result, from the cache when the
// tree has not grown since it was computed.
func (v *Verifier) Verify(ctx context.Context, tenantID int64) (VerifyResult, error) {
	var size int64
	var root []byte
	err := database.InTenantTx(ctx, v.db, tenantID, func(tx pgx.Tx) error {
		t, err := newStore(tx).tree(ctx, tenantID)
		size, root = t.Size, t.Root
		return err
	})
	if err != nil {
		return VerifyResult{}, wrapf(err, "read audit tree of tenant %d", tenantID)
	}
	v.mu.Lock()
	if r, ok := v.last[tenantID]; ok && r.TreeSize == size && bytes.Equal(r.Root, root) {
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
	call.res, call.err = v.verifyExclusive(ctx, tenantID)
	v.mu.Lock()
	delete(v.busy, tenantID)
	if call.err == nil {
		v.last[tenantID] = call.res
	}
	v.mu.Unlock()
	close(call.done)
}

// verifyExclusive is Verify holding the tenant's verification lock for the
// transaction. It tries rather than waits: a waiting replica would only walk
// the same trail again once the lock came free, since the cache that would
// spare it is per replica.
func (v *Verifier) verifyExclusive(ctx context.Context, tenantID int64) (VerifyResult, error) {
	tx, err := v.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return VerifyResult{}, wrapf(err, "begin audit verification of tenant %d", tenantID)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only
	if err := database.ScopeTx(ctx, tx, tenantID); err != nil {
		return VerifyResult{}, wrapf(err, "scope audit verification to tenant %d", tenantID)
	}
	var got bool
	if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1, hashtext($2::bigint::text))", verifyLockNamespace, tenantID).Scan(&got); err != nil {
		return VerifyResult{}, wrapf(err, "lock audit verification of tenant %d", tenantID)
	}
	if !got {
		return VerifyResult{}, ErrVerifyBusy
	}
	v.runs.Add(1)
	if v.walking != nil {
		v.walking(tenantID)
	}
	return verifyTx(ctx, tx, tenantID, VerifyOptions{VerifierKey: v.verifierKey})
}
