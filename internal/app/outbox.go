package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/natsbus"
	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/outboxconsole"
	"github.com/jejakhq/jejak/internal/webhook"
)

// outboxRuntime is the outbox relay and the webhook fan-out consumer of
// one replica, and its NATS connection.
type outboxRuntime struct {
	bus    *natsbus.Bus
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startOutbox connects to NATS (embedded when NATS_URL is unset), declares
// the stream and starts the relay and the webhook consumer. Every replica
// runs both; the relay claims only while it holds the relay lease (one
// replica at a time), and the maintenance leader's pruning rides on the job
// engine's election.
func startOutbox(ctx context.Context, cfg Config, env *Env, engine *job.Engine, clk clock.Clock, log *slog.Logger,
	onPublished func(result string, n int)) (*outboxRuntime, error) {
	bus, err := natsbus.Open(ctx, natsbus.Config{URL: cfg.NATSURL, DataDir: cfg.DataDir, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("NATS: %w", err)
	}
	relay, err := outbox.NewRelay(outbox.RelayConfig{Pool: env.System, Sink: natsbus.Sink{JS: bus.JS}, Clock: clk,
		WorkerID: engine.WorkerID(), IsLeader: engine.IsLeader, Logger: log, OnPublished: onPublished,
		// The scheduler's outbox.retention schedule prunes delivered messages.
		ScheduledPrune: true})
	if err != nil {
		bus.Close()
		return nil, err
	}
	if bus.Embedded {
		// The embedded server lives in this process: replicas sharing the
		// database would each publish to their own stream.
		if n, err := outboxconsole.New(env.System, clk).OtherReplicas(ctx, engine.WorkerID()); err == nil && n > 0 {
			log.Warn("other Jejak replicas share this database but NATS is embedded: each replica publishes to its own JetStream; set NATS_URL to one shared NATS server",
				"other_replicas", n)
		}
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	o := &outboxRuntime{bus: bus, cancel: cancel}
	fan := &webhook.Fanout{System: env.System, Jobs: webhookJobs(engine), Clock: clk, Logger: log}
	o.wg.Add(2)
	go func() { defer o.wg.Done(); relay.Run(rctx) }()
	go func() {
		defer o.wg.Done()
		if err := fan.Run(rctx, bus.Stream); err != nil {
			log.Error("webhook consumer stopped", "err", err)
		}
	}()
	log.Info("outbox relay started", "nats_embedded", bus.Embedded, "stream", natsbus.StreamName)
	return o, nil
}

// Close stops the relay (which settles its batch in flight) and the
// consumer, then closes NATS.
func (o *outboxRuntime) Close() {
	o.cancel()
	o.wg.Wait()
	o.bus.Close()
}

// OutboxStatus prints the outbox's counts, lag and last hour's deliveries.
func OutboxStatus(ctx context.Context, cfg Config, log *slog.Logger, out io.Writer) error {
	env, err := Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer env.Close()
	c := outboxconsole.New(env.System, clock.Database{})
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	capped := func(n int64) string {
		if n >= outboxconsole.CountCap {
			return fmt.Sprintf("%d+", n)
		}
		return fmt.Sprint(n)
	}
	lag := "ok"
	if st.Late() {
		lag = "LATE (above 2m)"
	}
	fmt.Fprintf(out, "pending      %s\nprocessing   %s\nfailed       %s\noldest pending age  %s  %s\ndelivered last hour %d\n",
		capped(st.Pending), capped(st.Processing), capped(st.Failed), st.OldestPendingAge.Round(1e9), lag, st.DeliveredLastHour())
	failed, err := c.Failed(ctx, "", 20)
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		fmt.Fprintf(out, "\nlatest failed messages:\n")
		for _, f := range failed {
			fmt.Fprintf(out, "  #%-8d %-20s %-24s %s:%s  %s\n", f.ID, f.TenantSlug, f.Type, f.AggregateType, f.AggregateID, f.LastError)
		}
	}
	return nil
}

// OutboxRetryFailed returns failed messages (of one tenant, or all) to
// pending; the reason lands in each affected tenant's audit trail.
func OutboxRetryFailed(ctx context.Context, cfg Config, log *slog.Logger, out io.Writer, slug, reason string) error {
	env, err := Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer env.Close()
	n, err := outboxconsole.New(env.System, clock.Database{}).Retry(ctx, outboxconsole.Operator{Via: "cli"}, reason, slug, 0)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d failed outbox messages returned to pending\n", n)
	return nil
}

// startDemoHooks starts the demo's webhook receiver and points the demo
// tenants' endpoints at it.
func startDemoHooks(ctx context.Context, env *Env, log *slog.Logger, out io.Writer) (*demo.HookReceiver, error) {
	h, err := demo.StartHookReceiver(env.System, env.WebhookSealer, log)
	if err != nil {
		return nil, err
	}
	if err := h.SeedEndpoints(ctx); err != nil {
		h.Close()
		return nil, err
	}
	// The demo writes its endpoints' secrets readable; seal them now.
	if _, err := webhook.SealStored(ctx, env.System, env.WebhookSealer); err != nil {
		h.Close()
		return nil, err
	}
	fmt.Fprintf(out, "Demo webhook receiver (what tenants' endpoints received): %s/\n", h.URL())
	return h, nil
}
