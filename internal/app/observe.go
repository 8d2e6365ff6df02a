package app

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/metrics"
	"github.com/jejakhq/jejak/internal/outboxconsole"
)

// Version names this build in jejak_build_info and exported spans (set
// with -ldflags "-X github.com/jejakhq/jejak/internal/app.Version=...").
var Version = "dev"

// NewMetrics builds the Prometheus registry over env's pools: the queue
// and outbox gauges come from snapshots of the system pool shared by all
// scrapes.
func NewMetrics(env *Env) *metrics.Registry {
	ob := outboxconsole.New(env.System, nil)
	return metrics.New(metrics.Options{
		Version:  Version,
		Queues:   []string{"default"},
		Snapshot: metrics.JobSnapshot(env.System, nil),
		Outbox: func(ctx context.Context) (metrics.OutboxSnapshot, error) {
			st, err := ob.Status(ctx)
			if err != nil {
				return metrics.OutboxSnapshot{}, err
			}
			// Delivered messages are not counted: the relay prunes them and
			// a count would read the whole table.
			return metrics.OutboxSnapshot{
				Messages:         map[string]int64{"pending": st.Pending, "processing": st.Processing, "failed": st.Failed},
				OldestPendingAge: st.OldestPendingAge,
			}, nil
		},
		Pools: map[string]*pgxpool.Pool{"app": env.App, "system": env.System},
	})
}

// outboxLag is the outbox-lag alert's source: the age of the oldest
// unpublished message, from the outbox console's bounded status read.
func outboxLag(env *Env) func(context.Context) (time.Duration, error) {
	ob := outboxconsole.New(env.System, nil)
	return func(ctx context.Context) (time.Duration, error) {
		st, err := ob.Status(ctx)
		if err != nil {
			return 0, err
		}
		return st.OldestPendingAge, nil
	}
}
