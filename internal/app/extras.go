package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/payment"
	"github.com/jejakhq/jejak/internal/schedule"
	"github.com/jejakhq/jejak/internal/webhook"
)

// extras are the parts around the engine for sensitive work: payments (the
// provider at JEJAK_PAYMENT_URL or the built-in simulator on loopback),
// the scheduler, the failure-rate guard and the pruning of webhook attempt
// tallies, run by the maintenance leader.
type extras struct {
	payments  *payment.Service
	scheduler *schedule.Scheduler
	sim       *payment.Simulator // nil when JEJAK_PAYMENT_URL is set
	stop      func()
}

func wireExtras(cfg Config, env *Env, engine *job.Engine, clk clock.Clock, log *slog.Logger) (*extras, error) {
	ext := &extras{stop: func() {}}
	url := cfg.PaymentURL
	if url == "" {
		sim, simURL, stop, err := payment.StartSimulator(env.System, log)
		if err != nil {
			return nil, err
		}
		ext.sim, ext.stop, url = sim, stop, simURL
	}
	ext.payments = payment.NewService(env.App, env.System, &payment.HTTPProvider{BaseURL: url}, engine, clk)
	// Retention runs as schedules (the engine and relay are configured with
	// ScheduledPrune) so its runs show on /admin and happen once per hour.
	schedules := append(schedule.Shipped(engine), schedule.Retention(engine, clk, outbox.DefaultRetention)...)
	ext.scheduler = schedule.New(env.System, clk, engine.WorkerID(), schedules...)
	engine.OnMaintenance(func(ctx context.Context) error {
		_, err := ext.scheduler.Tick(ctx)
		return err
	})
	// Retry storms: a kind failing above the threshold pauses itself (shown
	// on /admin) until staff resume it. The kind_auto_paused alert reads the
	// pause row itself, so it fires and resolves whichever replica paused
	// or resumed; guard.OnPause is left for extra notification.
	guard := job.FailureGuard{}
	engine.OnMaintenance(func(ctx context.Context) error {
		_, err := engine.CheckFailureRates(ctx, guard)
		return err
	})
	// The webhook success rates read 24 hours of tallies; older ones go,
	// once an hour (a pass runs every few seconds).
	var prunedHours time.Time
	engine.OnMaintenance(func(ctx context.Context) error {
		if time.Since(prunedHours) < time.Hour {
			return nil
		}
		prunedHours = time.Now()
		_, err := webhook.PruneHours(ctx, env.System, clk)
		return err
	})
	return ext, nil
}
