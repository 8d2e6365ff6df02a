package job

import "context"

// OnMaintenance adds fn to what the maintenance leader runs on each pass,
// after rescue and pruning. Only one replica leads at a time, so periodic
// work hooked here (the scheduler) runs on one replica; fn must still be
// safe if two replicas briefly both lead (claim its work idempotently).
func (e *Engine) OnMaintenance(fn func(ctx context.Context) error) {
	e.hooksMu.Lock()
	e.hooks = append(e.hooks, fn)
	e.hooksMu.Unlock()
}

func (e *Engine) runHooks(ctx context.Context) {
	e.hooksMu.Lock()
	hooks := append([]func(context.Context) error(nil), e.hooks...)
	e.hooksMu.Unlock()
	for _, fn := range hooks {
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			e.log.Error("maintenance hook", "err", err)
		}
	}
}
