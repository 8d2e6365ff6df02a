package database

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Listen calls wake once LISTEN on channel is in place and again on every
// notification, until ctx ends. A lost connection is logged and retried
// after retry; wake is also called on each (re)connect, because anything
// sent while nobody listened was missed. NOTIFY is only a wake-up: callers
// keep polling as the ground truth.
func Listen(ctx context.Context, pool *pgxpool.Pool, channel string, retry time.Duration, log *slog.Logger, wake func()) {
	for ctx.Err() == nil {
		if err := listenOnce(ctx, pool, channel, wake); err != nil && ctx.Err() == nil {
			log.Warn("notifications lost; reconnecting", "channel", channel, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(retry):
			}
		}
	}
}

func listenOnce(ctx context.Context, pool *pgxpool.Pool, channel string, wake func()) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// A connection interrupted mid-wait is unusable; otherwise make it
		// clean for the next user of the pool.
		if ctx.Err() != nil {
			conn.Conn().Close(context.Background()) //nolint:errcheck
		} else {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "UNLISTEN *")
		}
		conn.Release()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	wake()
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			return err
		}
		wake()
	}
}
