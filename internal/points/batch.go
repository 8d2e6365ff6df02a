package points

import (
	"context"
	"sync"
	"time"

	"github.com/jejakhq/jejak/internal/job"
)

// Awards of one tenant that arrive while a transaction of that tenant's
// awards is being written wait, and go together in the next transaction:
// one statement for their claims and ledger rows, then one for their
// balances, one for their outbox messages and one for their audit events,
// sent with COMMIT, however many there are. This is group commit done
// by the application. Per job, a transaction costs a WAL flush at commit,
// a round trip per statement and a lock on each of the twenty-odd
// relations it writes (more than a backend's sixteen fast-path slots, so
// they go through the shared lock manager): paid once per batch, they stop
// being what bounds a busy tenant's award rate. An award that finds no
// batch of its tenant in progress goes at once, alone, so a quiet tenant
// waits for nothing.
//
// Should a batch fail (a constraint, a deadlock with another replica),
// its awards are written again one by one, so one bad award fails only its
// own job.

// maxBatch bounds the awards in one transaction (and so its duration and
// the locks it holds).
const maxBatch = 200

// batchTimeout bounds one batch's transaction. The batch is written with
// the writing job's values but not its cancellation: the other jobs in it
// are waiting for the result.
const batchTimeout = 30 * time.Second

type request struct {
	j    *job.Job
	a    Award
	done chan error    // the request's result (buffered)
	lead chan struct{} // closed when this request's goroutine is to write the next batch
}

// batcher queues the awards waiting for their tenant's batch in progress.
type batcher struct {
	mu sync.Mutex
	// waiting holds, for each tenant with a batch in progress, the
	// requests that arrived since; a tenant is absent when none is.
	waiting map[int64][]*request
}

// awardBatched applies j's award a, alone or in a batch of its tenant's.
func (h *Handler) awardBatched(ctx context.Context, j *job.Job, a Award) error {
	r := &request{j: j, a: a, done: make(chan error, 1), lead: make(chan struct{})}
	if !h.batch.enter(j.TenantID, r) {
		// A batch is in progress: the writer of one of the next batches
		// takes r along, or hands r the turn to write one.
		select {
		case err := <-r.done:
			return err
		case <-r.lead:
		case <-ctx.Done():
			// A job given up (its lease lost, the engine stopping) stops
			// waiting, unless a batch already holds its award or it has
			// been handed the turn (the tenant's queue waits for it).
			// Leaving is safe either way: awards are deduplicated by
			// message id, so its retry applies it at most once.
			if h.batch.leave(j.TenantID, r) {
				return ctx.Err()
			}
			select {
			case err := <-r.done:
				return err
			case <-r.lead:
			}
		}
	}
	reqs := h.batch.take(j.TenantID, r)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	h.write(wctx, j.TenantID, reqs)
	cancel()
	h.batch.handOff(j.TenantID)
	return <-r.done
}

// write applies reqs and sends each its result.
func (h *Handler) write(ctx context.Context, tenantID int64, reqs []*request) {
	if len(reqs) > 1 {
		if err := h.awardMany(ctx, tenantID, reqs); err == nil {
			for _, r := range reqs {
				r.done <- nil
			}
			return
		}
	}
	for _, r := range reqs {
		r.done <- h.awardOne(ctx, r.j, r.a)
	}
}

// enter reports whether r's goroutine writes at once (no batch of the
// tenant is in progress); otherwise r waits in the tenant's queue.
func (b *batcher) enter(tenantID int64, r *request) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiting == nil {
		b.waiting = map[int64][]*request{}
	}
	q, busy := b.waiting[tenantID]
	if !busy {
		b.waiting[tenantID] = nil
		return true
	}
	b.waiting[tenantID] = append(q, r)
	return false
}

// take returns the batch r's goroutine writes: r and up to maxBatch-1 of
// the requests waiting.
func (b *batcher) take(tenantID int64, r *request) []*request {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.waiting[tenantID]
	if len(q) > 0 && q[0] == r {
		q = q[1:] // r was handed the turn: it waited first in line
	}
	n := min(len(q), maxBatch-1)
	reqs := append([]*request{r}, q[:n]...)
	b.waiting[tenantID] = q[n:]
	return reqs
}

// leave takes r out of its tenant's queue and reports whether it was
// there to take: not when a batch took it, nor when it was handed the turn
// to write the next one.
func (b *batcher) leave(tenantID int64, r *request) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-r.lead:
		return false
	default:
	}
	q := b.waiting[tenantID]
	for i, w := range q {
		if w == r {
			b.waiting[tenantID] = append(q[:i:i], q[i+1:]...)
			return true
		}
	}
	return false
}

// handOff ends a batch: the first request waiting writes the next one, or
// the tenant has no batch in progress any more.
func (b *batcher) handOff(tenantID int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if q := b.waiting[tenantID]; len(q) > 0 {
		close(q[0].lead)
		return
	}
	delete(b.waiting, tenantID)
}
