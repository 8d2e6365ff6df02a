package webhook_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/natsbus"
	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/webhook"
)

// The whole path on a real nats-server: outbox → relay → JetStream →
// consumer → delivery job. Then the consumer is recreated, so JetStream
// delivers the same event again: no second job appears.
func TestJetStreamRedeliveryCreatesNoSecondJob(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	bus, err := natsbus.Open(ctx, natsbus.Config{DataDir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	if _, err := v.svc.Create(ctx, v.tenant, v.owner, "https://example.com/hook", "*"); err != nil {
		t.Fatal(err)
	}
	err = database.InTenantTx(ctx, v.db.App, v.tenant, func(tx pgx.Tx) error {
		_, err := outbox.NewWriter(v.clk).Publish(ctx, tx, v.tenant, outbox.Message{Type: "project.created",
			AggregateType: "project", AggregateID: "9", Payload: map[string]any{"name": "Katalog"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewRelay(outbox.RelayConfig{Pool: v.db.System, Sink: natsbus.Sink{JS: bus.JS}, Clock: v.clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.RunOnce(ctx); n != 1 || err != nil {
		t.Fatalf("relay: %d %v", n, err)
	}
	consumeAll := func() {
		t.Helper()
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- v.fanout.Run(cctx, bus.Stream) }()
		deadline := time.Now().Add(20 * time.Second)
		for {
			c, err := bus.Stream.Consumer(ctx, webhook.ConsumerName)
			if err == nil {
				if info, err := c.Info(ctx); err == nil && info.AckFloor.Stream >= 1 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("consumer did not acknowledge the event")
			}
			time.Sleep(10 * time.Millisecond) // polling for an outcome, with a deadline
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	consumeAll()
	if n := v.count(t, "SELECT count(*) FROM jobs WHERE kind = 'webhook.deliver'"); n != 1 {
		t.Fatalf("%d jobs after the first delivery, want 1", n)
	}
	if err := bus.Stream.DeleteConsumer(ctx, webhook.ConsumerName); err != nil {
		t.Fatal(err)
	}
	consumeAll() // a fresh consumer receives the event again
	if n := v.count(t, "SELECT count(*) FROM jobs WHERE kind = 'webhook.deliver'"); n != 1 {
		t.Fatalf("%d jobs after redelivery, want still 1", n)
	}
	if n := v.count(t, "SELECT count(*) FROM webhook_deliveries"); n != 1 {
		t.Fatalf("%d deliveries, want 1", n)
	}
}
