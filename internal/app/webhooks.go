package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/webhook"
)

// Webhook deliveries run on an engine of their own: a receiver that hangs
// holds its worker for up to webhook.Timeout, so deliveries get
// JEJAK_WEBHOOK_WORKERS workers beside the JEJAK_WORKERS that every
// tenant's other jobs need, and one tenant at most
// JEJAK_WEBHOOK_TENANT_CONCURRENCY of them.

// WebhookEngineConfig is the engine working webhook.Queue with cfg's
// limits on pool (jejak_system); newWebhookEngine adds the clock, the
// worker id, the logger and the observer. The claim leaves a tenant no
// more deliveries in flight than the Deliverer lets it run: one busy
// tenant's jobs over its places would otherwise fill every worker, only
// to be put back for a second each. The main engine keeps maintenance
// (its rescue and pruning cover every queue).
func WebhookEngineConfig(cfg Config, pool *pgxpool.Pool) job.Config {
	return job.Config{Pool: pool, Workers: cfg.WebhookWorkers, Queues: []string{webhook.Queue}, NoMaintenance: true,
		LeaseDuration: cfg.Lease, HeartbeatInterval: cfg.Heartbeat, TenantConcurrency: cfg.WebhookTenantConcurrency}
}

// newWebhookEngine builds the engine working webhook.Queue.
func newWebhookEngine(cfg Config, env *Env, clk clock.Clock, log *slog.Logger, obs job.Observer, mainID string) (*job.Engine, error) {
	c := WebhookEngineConfig(cfg, env.System)
	c.Clock, c.WorkerID, c.Logger, c.Observer = clk, mainID+"/webhooks", log.With("engine", "webhooks"), obs
	return job.New(c)
}

// webhookJobs is the enqueuer every webhook enqueue goes through: onto
// webhook.Queue.
func webhookJobs(engine *job.Engine) webhook.Enqueuer { return webhook.OnQueue(engine, webhook.Queue) }

// startWebhookEngine starts wh and makes ext.stop stop it (in-flight
// deliveries get the same deadline as the main engine's jobs).
func startWebhookEngine(ctx context.Context, wh *job.Engine, ext *extras, log *slog.Logger) error {
	if err := wh.Start(ctx); err != nil {
		return fmt.Errorf("start webhook workers: %w", err)
	}
	log.Info("webhook workers started", "worker_id", wh.WorkerID())
	stop := ext.stop
	ext.stop = func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := wh.Stop(stopCtx); err != nil {
			log.Error("stop webhook workers", "error", err.Error())
		}
		stop()
	}
	return nil
}
