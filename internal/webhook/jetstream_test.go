package webhook_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/metrics"
	"github.com/jejakhq/jejak/internal/natsbus"
	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/testwait"
	"github.com/jejakhq/jejak/internal/webhook"
)

// The whole path on a real nats-server: outbox → relay → JetStream →
// consumer → delivery job. Then the consumer is recreated, so JetStream
// delivers the same event again: no second job appears.
func TestJetStreamRedeliveryCreatesNoSecondJob(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	bus := openBus(t)
	if _, err := v.svc.Create(ctx, v.tenant, v.owner, "https://example.com/hook", "*"); err != nil {
		t.Fatal(err)
	}
	err := database.InTenantTx(ctx, v.db.App, v.tenant, func(tx pgx.Tx) error {
		_, err := outbox.NewWriter(v.clk).Publish(ctx, tx, v.tenant, outbox.Message{Type: "project.created",
			AggregateType: "project", AggregateID: "9", Payload: map[string]any{"name": "Katalog"}, RequestedBy: &v.owner.UserID})
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
		testwait.Within(t, 20*time.Second, "the consumer to acknowledge the event", func() bool {
			c, err := bus.Stream.Consumer(ctx, webhook.ConsumerName)
			if err != nil {
				return false
			}
			info, err := c.Info(ctx)
			return err == nil && info.AckFloor.Stream >= 1
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	consumeAll()
	if n := v.count(t, "SELECT count(*) FROM jobs WHERE kind = 'webhook.deliver'"); n != 1 {
		t.Fatalf("%d jobs after the first delivery, want 1", n)
	}
	// The delivery is done on behalf of the user whose action the event
	// reports: outbox row, relay header, fan-out, job.
	if n := v.count(t, "SELECT count(*) FROM jobs WHERE kind = 'webhook.deliver' AND requested_by = $1", v.owner.UserID); n != 1 {
		t.Fatal("the delivery's job does not name the user who caused the event")
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

// TestFanoutPendingIsExported: jejak_webhook_fanout_pending reads the
// shared consumer's backlog from the real nats-server: absent until the
// consumer exists, the events not yet recorded while nothing consumes,
// and zero once the fan-out has recorded them all.
func TestFanoutPendingIsExported(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	bus := openBus(t)
	for i := 1; i <= 3; i++ {
		publishEvent(t, bus, v.tenant, i, []byte(`{"id":"evt_`+strconv.Itoa(i)+`"}`))
	}
	reg := metrics.New(metrics.Options{})
	reg.WatchFanout(func(ctx context.Context) (int64, error) { return webhook.FanoutPending(ctx, bus.Stream) })
	gauge := func() (float64, bool) {
		t.Helper()
		fams, err := reg.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == "jejak_webhook_fanout_pending" {
				return f.GetMetric()[0].GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	if n, ok := gauge(); ok {
		t.Fatalf("jejak_webhook_fanout_pending = %v before the consumer exists, want no sample", n)
	}
	// The consumer as the fan-out declares it, before anything consumes.
	if _, err := bus.Stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: webhook.ConsumerName,
		AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: natsbus.SubjectPrefix + ".>"}); err != nil {
		t.Fatal(err)
	}
	if n, ok := gauge(); !ok || n != 3 {
		t.Fatalf("jejak_webhook_fanout_pending = %v (%v) with three events unconsumed, want 3", n, ok)
	}
	// Handed out but not acknowledged (a replica's batch in flight) still
	// counts.
	cons, err := bus.Stream.Consumer(ctx, webhook.ConsumerName)
	if err != nil {
		t.Fatal(err)
	}
	fetched, err := cons.Fetch(3, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var inFlight []jetstream.Msg
	for m := range fetched.Messages() {
		inFlight = append(inFlight, m)
	}
	if n, ok := gauge(); len(inFlight) != 3 || n != 3 {
		t.Fatalf("jejak_webhook_fanout_pending = %v (%v) with %d events handed out unacknowledged, want 3", n, ok, len(inFlight))
	}
	for _, m := range inFlight {
		if err := m.Nak(); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- v.fanout.Run(cctx, bus.Stream) }()
	testwait.For(t, "jejak_webhook_fanout_pending to reach 0 once the fan-out runs", func() bool {
		n, ok := gauge()
		return ok && n == 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFanoutShutdownGivesQueuedEventsBack: events a replica received but
// had not started on when it stops are NAKed at once, so the consumer
// hands them out again within seconds rather than after AckWait (30 s);
// the batch cut short by the shutdown waits its pause.
func TestFanoutShutdownGivesQueuedEventsBack(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	bus := openBus(t)
	publish := func(i int) {
		t.Helper()
		publishEvent(t, bus, v.tenant, i, []byte(`{"id":"evt_`+strconv.Itoa(i)+`"}`))
	}
	// The first batch blocks on the endpoints table.
	lock, err := v.db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx) //nolint:errcheck
	if _, err := lock.Exec(ctx, "LOCK TABLE webhook_endpoints IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	publish(1)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- v.fanout.Run(cctx, bus.Stream) }()
	testwait.For(t, "the first batch waiting for its lock", func() bool {
		return v.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE '%webhook_endpoints%'`) == 1
	})
	publish(2)
	publish(3)
	cons, err := bus.Stream.Consumer(ctx, webhook.ConsumerName)
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "events 2 and 3 handed to the replica", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumAckPending == 3
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for m := range batch.Messages() {
		got = append(got, m.Headers().Get(jetstream.MsgIDHeader))
	}
	slices.Sort(got)
	if len(got) != 2 || got[0] != "2" || got[1] != "3" {
		t.Fatalf("redelivered within 3 s of the shutdown: %v, want events 2 and 3 (event 1 waits its pause)", got)
	}
}
