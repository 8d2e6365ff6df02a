package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/natsbus"
	"github.com/jejakhq/jejak/internal/outbox"
)

// ConsumerName is the durable JetStream consumer that fans events out to
// webhooks. Replicas share it, so each event is handled by one of them.
const ConsumerName = "jejak-webhooks"

// Fanout turns each event into one delivery (and one webhook.deliver job)
// per matching enabled endpoint of the event's tenant.
type Fanout struct {
	// System is the cross-tenant pool (jejak_system): an event names its
	// tenant, and the consumer serves all of them.
	System database.Pool
	Jobs   Enqueuer
	Clock  clock.Clock
	Logger *slog.Logger
}

// HandleEvent records the deliveries of one event and enqueues their
// first attempts in one transaction. It is idempotent: a redelivered event
// finds its deliveries and the jobs' idempotency keys (event id +
// endpoint), and creates nothing. It returns how many jobs it enqueued.
func (f *Fanout) HandleEvent(ctx context.Context, tenantID, eventID int64, eventType string, body []byte, traceID string) (int, error) {
	clk := f.Clock
	if clk == nil {
		clk = clock.Database{}
	}
	created := 0
	err := database.InTx(ctx, f.System, func(tx pgx.Tx) error {
		created = 0
		st := newStore(tx)
		eps, err := st.matching(ctx, tenantID, eventType)
		if err != nil {
			return fmt.Errorf("match webhook endpoints: %w", err)
		}
		agg := aggregateOf(body)
		for _, ep := range eps {
			did, _, err := st.insertDelivery(ctx, tenantID, ep, eventID, eventType, string(body), agg, clk.Now())
			if err != nil {
				return fmt.Errorf("record webhook delivery: %w", err)
			}
			key := fmt.Sprintf("evt_%d:ep_%d", eventID, ep)
			p := jobPayloadJSON(tenantID, did)
			res, err := f.Jobs.Enqueue(ctx, tx, jobParams(tenantID, p, nil, traceID, key))
			if err != nil {
				return fmt.Errorf("enqueue webhook delivery: %w", err)
			}
			if !res.Existing {
				created++
			}
		}
		return nil
	})
	return created, err
}

// aggregateOf is "type/id" of the event body's aggregate, which ordered
// endpoints keep in order; nil when the body names none.
func aggregateOf(body []byte) *string {
	var b struct {
		Aggregate outbox.BodyAggregate `json:"aggregate"`
	}
	if json.Unmarshal(body, &b) != nil || b.Aggregate.Type == "" || b.Aggregate.ID == "" {
		return nil
	}
	s := b.Aggregate.Type + "/" + b.Aggregate.ID
	return &s
}

// Run consumes the stream until ctx ends. A message is acknowledged only
// after its deliveries committed; on error it is redelivered after a pause.
func (f *Fanout) Run(ctx context.Context, stream jetstream.Stream) error {
	log := f.Logger
	if log == nil {
		log = slog.Default()
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: ConsumerName, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		FilterSubject: natsbus.SubjectPrefix + ".>", MaxAckPending: 1000,
		Description: "fans Jejak events out to tenant webhooks",
	})
	if err != nil {
		return fmt.Errorf("webhook consumer: %w", err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		id, tid, err := natsbus.EventOf(m)
		if err != nil {
			_ = m.Term() // not ours; never redeliver it
			return
		}
		h := m.Headers()
		if _, err := f.HandleEvent(ctx, tid, id, h.Get(natsbus.HeaderEventType), m.Data(), h.Get(natsbus.HeaderTraceID)); err != nil {
			if ctx.Err() == nil {
				log.Error("webhook fan-out", "event_id", id, "tenant_id", tid, "err", err)
			}
			_ = m.NakWithDelay(5 * time.Second)
			return
		}
		_ = m.Ack()
	})
	if err != nil {
		return fmt.Errorf("consume webhook events: %w", err)
	}
	<-ctx.Done()
	cc.Stop()
	return nil
}
