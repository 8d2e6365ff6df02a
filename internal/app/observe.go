package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/alert"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/metrics"
	"github.com/jejakhq/jejak/internal/outboxconsole"
	"github.com/jejakhq/jejak/internal/webhook"
)

// Version names this build in jejak_build_info and exported spans (set
// with -ldflags "-X github.com/jejakhq/jejak/internal/app.Version=...").
var Version = "dev"

// NewMetrics builds the Prometheus registry over env's pools: the queue
// and outbox gauges come from snapshots of the system pool shared by all
// scrapes.
func NewMetrics(env *Env) *metrics.Registry {
	ob := outboxconsole.New(env.System, nil)
	pools := map[string]*pgxpool.Pool{"app": env.App, "system": env.System}
	if env.Seal != nil {
		pools["seal"] = env.Seal
	}
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
		Audit: func(ctx context.Context) (metrics.AuditSnapshot, error) {
			backlog, err := audit.Backlogs(ctx, env.System)
			if err != nil {
				return metrics.AuditSnapshot{}, err
			}
			s := auditSnapshot(backlog, time.Now())
			s.Unindexed, err = audit.Unindexed(ctx, env.System)
			return s, err
		},
		Pools: pools,
	})
}

// auditSnapshot sums the sealer's per-tenant backlog.
func auditSnapshot(backlog []audit.Backlog, now time.Time) metrics.AuditSnapshot {
	var s metrics.AuditSnapshot
	for _, b := range backlog {
		s.Unsealed += b.Events
		s.OldestUnsealedAge = max(s.OldestUnsealedAge, now.Sub(b.Oldest))
	}
	return s
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

// staffWebhook keeps the system tenant's endpoint in step with
// JEJAK_ALERT_WEBHOOK_URL / _SECRET (disabled when the URL is unset) and
// returns the notifier publishing alert transitions to it; nil when none
// is configured.
func staffWebhook(ctx context.Context, cfg Config, env *Env, clk clock.Clock, log *slog.Logger) (*alert.Notifier, error) {
	ep, err := webhook.SyncSystemEndpoint(ctx, env.System, clk, webhook.SystemConfig{URL: cfg.AlertWebhookURL,
		Secret: cfg.AlertWebhookSecret, Events: []string{alert.EventType}, Sealer: env.WebhookSealer})
	if err != nil {
		return nil, err
	}
	if !ep.Configured {
		return nil, nil
	}
	secret := "JEJAK_ALERT_WEBHOOK_SECRET"
	if cfg.AlertWebhookSecret == "" {
		secret = "generated, shown to staff on /admin/alerts"
	}
	log.Info("alert transitions go to the staff webhook", "url", ep.Endpoint.URL, "secret", secret)
	return alert.NewNotifier(ep.TenantID, clk), nil
}
