package job

import (
	"context"
	"fmt"
)

// WorkOnce claims up to n due jobs as this engine's worker and runs each to
// its outcome on the calling goroutine: started, then succeeded, failed,
// delayed or rejected, exactly as the pool would record them. It returns
// how many jobs it ran. Tools and tests with a frozen clock use it to step
// the engine deterministically; the pool is the production path.
func (e *Engine) WorkOnce(ctx context.Context, n int) (int, error) {
	jobs, err := e.Claim(ctx, e.cfg.WorkerID, n)
	if err != nil {
		return 0, err
	}
	for _, j := range jobs {
		if err := e.runClaimed(ctx, j); err != nil {
			return 0, err
		}
	}
	return len(jobs), nil
}

func (e *Engine) runClaimed(ctx context.Context, j *Job) error {
	audited := e.sensitive(j.Kind)
	if audited {
		if err := e.recordStarted(ctx, j); err != nil {
			return fmt.Errorf("audit start of job %d: %w", j.ID, err)
		}
	}
	herr := e.invokeCtx(ctx, j)
	if herr == nil {
		if e.audited(j) {
			return e.completeAudited(ctx, j)
		}
		return e.CompleteAttempt(ctx, j.WorkerID, j.TenantID, j.ID, j.Attempt)
	}
	if after, reason, ok := DelayOf(herr); ok {
		return e.delayJob(ctx, j, after, reason)
	}
	_, err := e.failJob(ctx, j, herr)
	return err
}
