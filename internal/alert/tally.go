package alert

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/job"
)

// WorkerTally counts this replica's attempts and failures in memory and
// flushes them to alert_worker_minute, so the leader can compare workers
// without reading jobs. It forwards every engine event to Next (metrics).
type WorkerTally struct {
	job.Observer // Next: every event is forwarded

	mu                 sync.Mutex
	attempts, failures int64
}

// NewWorkerTally wraps next (nil = job.NopObserver).
func NewWorkerTally(next job.Observer) *WorkerTally {
	if next == nil {
		next = job.NopObserver{}
	}
	return &WorkerTally{Observer: next}
}

// JobFinished counts the attempt and forwards it.
func (w *WorkerTally) JobFinished(kind string, outcome job.Outcome, run time.Duration) {
	w.mu.Lock()
	w.attempts++
	if outcome != job.OutcomeSucceeded {
		w.failures++
	}
	w.mu.Unlock()
	w.Observer.JobFinished(kind, outcome, run)
}

// Flush writes the counts gathered since the last flush under workerID
// (one upsert), and keeps them for the next flush if the write fails.
func (w *WorkerTally) Flush(ctx context.Context, pool *pgxpool.Pool, clk clock.Clock, workerID string) error {
	w.mu.Lock()
	a, f := w.attempts, w.failures
	w.attempts, w.failures = 0, 0
	w.mu.Unlock()
	if a == 0 && f == 0 {
		return nil
	}
	st := newStore(pool)
	now, err := st.now(ctx, clk.Now())
	if err == nil {
		err = st.addWorker(ctx, workerID, now, a, f)
	}
	if err != nil {
		w.mu.Lock()
		w.attempts += a
		w.failures += f
		w.mu.Unlock()
	}
	return err
}

// Run flushes every interval until ctx ends, then once more.
func (w *WorkerTally) Run(ctx context.Context, pool *pgxpool.Pool, clk clock.Clock, workerID string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = w.Flush(context.WithoutCancel(ctx), pool, clk, workerID)
			return
		case <-t.C:
			_ = w.Flush(ctx, pool, clk, workerID)
		}
	}
}
