package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jejakhq/jejak/internal/natsbus"
	"github.com/jejakhq/jejak/internal/testwait"
	"github.com/jejakhq/jejak/internal/webhook"
)

// One call fans a batch out: each event gets one delivery and one job per
// enabled endpoint of its own tenant that takes its type, an event given
// twice is recorded once, and the same batch again creates nothing.
func TestFanoutRecordsABatchOnce(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	endpoint := func(tenant int64, actor webhook.Actor, events string) int64 {
		t.Helper()
		c, err := v.svc.Create(ctx, tenant, actor, "https://example.com/"+strconv.Itoa(len(events)), events)
		if err != nil {
			t.Fatal(err)
		}
		return c.Endpoint.ID
	}
	all := endpoint(v.tenant, v.owner, "*")
	created := endpoint(v.tenant, v.owner, "project.created")
	off := endpoint(v.tenant, v.owner, "project.deleted")
	if err := v.svc.SetEnabled(ctx, v.tenant, v.owner, off, false); err != nil {
		t.Fatal(err)
	}
	lain := seedTenant(t, v.db, "lain")
	other := lain.tenant
	theirs := endpoint(other, lain.owner, "*")

	events := []webhook.Event{
		{TenantID: v.tenant, ID: 11, Type: "project.created", Body: []byte(`{"aggregate":{"type":"project","id":"1"}}`), TraceID: "t11"},
		{TenantID: v.tenant, ID: 12, Type: "project.deleted", Body: []byte(`{}`), TraceID: "t12"},
		{TenantID: other, ID: 13, Type: "project.created", Body: []byte(`{}`), TraceID: "t13"},
		{TenantID: v.tenant, ID: 11, Type: "project.created", Body: []byte(`{"aggregate":{"type":"project","id":"1"}}`), TraceID: "t11"},
		{TenantID: 999999, ID: 14, Type: "project.created", Body: []byte(`{}`)},
	}
	want := map[string]bool{
		fmt.Sprintf("evt_11:ep_%d", all): true, fmt.Sprintf("evt_11:ep_%d", created): true,
		fmt.Sprintf("evt_12:ep_%d", all): true, fmt.Sprintf("evt_13:ep_%d", theirs): true,
	}
	for round, wantCreated := range []int{len(want), 0} {
		n, err := v.fanout.HandleEvents(ctx, events)
		if err != nil {
			t.Fatal(err)
		}
		if n != wantCreated {
			t.Fatalf("round %d: created %d deliveries, want %d", round, n, wantCreated)
		}
		rows, err := v.db.Admin.Query(ctx, `SELECT j.idempotency_key, j.trace_id, d.tenant_id, coalesce(d.aggregate, '')
			FROM jobs j JOIN webhook_deliveries d ON d.id = (j.payload->>'delivery_id')::bigint
			WHERE j.kind = 'webhook.deliver'`)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for rows.Next() {
			var key, trace, agg string
			var tenant int64
			if err := rows.Scan(&key, &trace, &tenant, &agg); err != nil {
				t.Fatal(err)
			}
			got[key] = true
			var ev int64
			var ep int64
			if _, err := fmt.Sscanf(key, "evt_%d:ep_%d", &ev, &ep); err != nil {
				t.Fatalf("job key %q: %v", key, err)
			}
			if wantTrace := fmt.Sprintf("t%d", ev); trace != wantTrace {
				t.Errorf("job %s has trace %q, want %q", key, trace, wantTrace)
			}
			if (ep == theirs) != (tenant == other) {
				t.Errorf("job %s belongs to tenant %d", key, tenant)
			}
			if wantAgg := map[int64]string{11: "project/1"}[ev]; agg != wantAgg {
				t.Errorf("delivery of %s has aggregate %q, want %q", key, agg, wantAgg)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("round %d: jobs %v, want %v", round, got, want)
		}
		for k := range want {
			if !got[k] {
				t.Fatalf("round %d: no job %s among %v", round, k, got)
			}
		}
		if d := v.count(t, "SELECT count(*) FROM webhook_deliveries"); d != len(want) {
			t.Fatalf("round %d: %d deliveries, want %d", round, d, len(want))
		}
	}
}

// Events of one aggregate fanned out in one batch keep their stream order
// in their deliveries' ids, the order an ordered endpoint delivers them in.
func TestFanoutBatchKeepsStreamOrder(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	c, err := v.svc.Create(ctx, v.tenant, v.owner, "https://example.com/hook", "*")
	if err != nil {
		t.Fatal(err)
	}
	if err := v.svc.Configure(ctx, v.tenant, v.owner, c.Endpoint.ID, webhook.Settings{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	// Event ids out of numeric order, as a stream may carry them (the
	// relay publishes in claim order, not id order).
	ids := []int64{30, 10, 50, 20, 40, 70, 60}
	events := make([]webhook.Event, len(ids))
	for i, id := range ids {
		events[i] = webhook.Event{TenantID: v.tenant, ID: id, Type: "project.updated",
			Body: []byte(`{"aggregate":{"type":"project","id":"7"}}`)}
	}
	if n, err := v.fanout.HandleEvents(ctx, events); err != nil || n != len(ids) {
		t.Fatalf("created %d (%v), want %d", n, err, len(ids))
	}
	rows, err := v.db.Admin.Query(ctx, "SELECT event_id FROM webhook_deliveries ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("deliveries in id order carry events %v (%v), want the stream's order %v", got, err, ids)
	}
}

// An event that cannot be recorded (its body is not valid text for the
// database) makes its batch fail; the events beside it are recorded and
// acknowledged all the same, and only it waits for redelivery.
func TestFanoutBatchHoldsBackOnlyTheEventItCannotRecord(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	if _, err := v.svc.Create(ctx, v.tenant, v.owner, "https://example.com/hook", "*"); err != nil {
		t.Fatal(err)
	}
	cons, msgs := fetchEvents(t, v.tenant, []byte(`{"n":1}`), []byte{'{', 0xff, '}'}, []byte(`{"n":3}`))
	v.fanout.HandleBatch(ctx, msgs)

	rows, err := v.db.Admin.Query(ctx, "SELECT event_id FROM webhook_deliveries ORDER BY event_id")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || fmt.Sprint(got) != "[1 3]" {
		t.Fatalf("deliveries of events %v (%v), want [1 3]", got, err)
	}
	if n := v.count(t, "SELECT count(*) FROM jobs WHERE kind = 'webhook.deliver'"); n != 2 {
		t.Fatalf("%d jobs, want 2", n)
	}
	// The server saw two acknowledgements and one refusal: only the
	// unrecordable event is still pending (redelivered after a pause).
	waitForPending(t, cons, 1, 1)
}

// When the database cannot be reached, a batch goes back whole: one error
// logged, and no event tried on its own (each would fail the same way).
func TestFanoutBatchWaitsWholeWhenTheDatabaseFails(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	closed, err := pgxpool.New(ctx, v.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	var logged bytes.Buffer
	fan := &webhook.Fanout{System: closed, Jobs: v.engine, Clock: v.clk,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))}
	cons, msgs := fetchEvents(t, v.tenant, []byte(`{"n":1}`), []byte(`{"n":2}`), []byte(`{"n":3}`))
	fan.HandleBatch(ctx, msgs)
	if n := strings.Count(logged.String(), "webhook fan-out"); n != 1 {
		t.Fatalf("%d errors logged for one failed batch, want 1:\n%s", n, logged.String())
	}
	waitForPending(t, cons, 3, 0)
}

// fetchEvents publishes one event of tenant per body on a real
// nats-server, as the relay would, and fetches them all from a consumer of
// their own.
func fetchEvents(t *testing.T, tenant int64, bodies ...[]byte) (jetstream.Consumer, []jetstream.Msg) {
	t.Helper()
	ctx := context.Background()
	bus := openBus(t)
	for i, b := range bodies {
		publishEvent(t, bus, tenant, i+1, b)
	}
	cons, err := bus.Stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "test", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	fetched, err := cons.Fetch(len(bodies), jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range fetched.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) != len(bodies) {
		t.Fatalf("fetched %d events, want %d", len(msgs), len(bodies))
	}
	return cons, msgs
}

// openBus starts a real nats-server with the stream, for this test only.
func openBus(t *testing.T) *natsbus.Bus {
	t.Helper()
	bus, err := natsbus.Open(context.Background(), natsbus.Config{DataDir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	return bus
}

// publishEvent publishes event n (a project.created of tenant) with body,
// as the relay would.
func publishEvent(t *testing.T, bus *natsbus.Bus, tenant int64, n int, body []byte) {
	t.Helper()
	m := nats.NewMsg(natsbus.Subject("toko", "project.created"))
	m.Data = body
	m.Header.Set(jetstream.MsgIDHeader, strconv.Itoa(n))
	m.Header.Set(natsbus.HeaderTenantID, strconv.FormatInt(tenant, 10))
	m.Header.Set(natsbus.HeaderEventType, "project.created")
	if _, err := bus.JS.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// waitForPending waits until the server counts pending events awaiting
// their acknowledgement and every event up to ackFloor acknowledged.
func waitForPending(t *testing.T, cons jetstream.Consumer, pending int, ackFloor uint64) {
	t.Helper()
	var info *jetstream.ConsumerInfo
	testwait.For(t, fmt.Sprintf("%d events pending and the ack floor at %d", pending, ackFloor), func() bool {
		var err error
		if info, err = cons.Info(context.Background()); err != nil {
			t.Fatal(err)
		}
		return info.NumAckPending == pending && info.AckFloor.Stream == ackFloor
	})
}
