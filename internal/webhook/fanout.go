package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
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

// Event is one event to fan out, as the stream carries it.
type Event struct {
	TenantID, ID int64
	Type         string
	Body         []byte
	TraceID      string
	// RequestedBy is the user whose action the event reports (nil: the
	// system's own); its deliveries' jobs are requested on their behalf.
	RequestedBy *int64
}

// HandleEvent is HandleEvents for one event.
func (f *Fanout) HandleEvent(ctx context.Context, tenantID, eventID int64, eventType string, body []byte, traceID string) (int, error) {
	return f.HandleEvents(ctx, []Event{{TenantID: tenantID, ID: eventID, Type: eventType, Body: body, TraceID: traceID}})
}

// HandleEvents records one delivery per matching enabled endpoint of each
// event's tenant and enqueues their first attempts, in one transaction of
// at most three statements however many events there are: a consumer
// that took a transaction per event fell behind a stream of a few hundred
// events a second. It is idempotent: a redelivered event finds its
// deliveries and creates nothing, nor a job (an event given twice is
// recorded once). It returns how many first attempts it enqueued (a
// delivery held behind an open breaker has none).
func (f *Fanout) HandleEvents(ctx context.Context, events []Event) (int, error) {
	clk := f.Clock
	if clk == nil {
		clk = clock.Database{}
	}
	created := 0
	err := database.InTx(ctx, f.System, func(tx pgx.Tx) error {
		created = 0
		st := newStore(tx)
		ms, err := st.matching(ctx, events)
		if err != nil {
			return fmt.Errorf("match webhook endpoints: %w", err)
		}
		if len(ms) == 0 {
			return nil
		}
		type pair struct{ event, endpoint int64 }
		seen := make(map[pair]bool, len(ms))
		ds := make([]newDelivery, 0, len(ms))
		from := make([]int, 0, len(ms)) // the event of ds[i]
		body, agg := "", (*string)(nil) // of the event last read: ms lists each event's endpoints together
		for i, m := range ms {
			e := &events[m.Event]
			if k := (pair{e.ID, m.Endpoint}); !seen[k] {
				seen[k] = true
				if i == 0 || m.Event != ms[i-1].Event {
					body, agg = string(e.Body), aggregateOf(e.Body)
				}
				ds = append(ds, newDelivery{TenantID: e.TenantID, EndpointID: m.Endpoint, EventID: e.ID,
					EventType: e.Type, Body: body, Aggregate: agg, RequestedBy: e.RequestedBy, TraceID: e.TraceID})
				from = append(from, m.Event)
			}
		}
		ids, needJob, err := st.insertDeliveries(ctx, ds, clk.Now())
		if err != nil {
			return fmt.Errorf("record webhook deliveries: %w", err)
		}
		jobs := make([]job.EnqueueParams, 0, len(ds))
		for i, d := range ds {
			if !needJob[i] {
				continue // recorded before, with its job; or held behind an open breaker
			}
			e := &events[from[i]]
			jobs = append(jobs, jobParams(d.TenantID, jobPayloadJSON(d.TenantID, ids[i]), nil, e.TraceID, e.RequestedBy,
				firstAttemptKey(d.EventID, d.EndpointID)))
		}
		if len(jobs) == 0 {
			return nil
		}
		if _, err := f.Jobs.EnqueueMany(ctx, tx, jobs); err != nil {
			return fmt.Errorf("enqueue webhook deliveries: %w", err)
		}
		created = len(jobs)
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

// fanoutBatch is the most events one transaction of the consumer takes.
const fanoutBatch = 256

// maxAckPending is how many events the server hands the consumer before
// it acknowledges any.
const maxAckPending = 1000

// FanoutPending is how many events of stream the fan-out consumer has yet
// to record: those not handed to it yet and those handed out but not
// acknowledged (acknowledged only once their deliveries are committed).
func FanoutPending(ctx context.Context, stream jetstream.Stream) (int64, error) {
	cons, err := stream.Consumer(ctx, ConsumerName)
	if err != nil {
		return 0, fmt.Errorf("webhook consumer: %w", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("webhook consumer info: %w", err)
	}
	return int64(info.NumPending) + int64(info.NumAckPending), nil
}

// Run consumes the stream until ctx ends, in batches: each transaction
// takes every event that has arrived (up to fanoutBatch), so a backlog
// drains in few transactions and a quiet stream waits for none. An event
// is acknowledged only after its deliveries committed; on error it is
// redelivered after a pause.
func (f *Fanout) Run(ctx context.Context, stream jetstream.Stream) error {
	log := f.logger()
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: ConsumerName, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		FilterSubject: natsbus.SubjectPrefix + ".>", MaxAckPending: maxAckPending,
		Description: "fans Jejak events out to tenant webhooks",
	})
	if err != nil {
		return fmt.Errorf("webhook consumer: %w", err)
	}
	// The callback only queues. The server hands out at most
	// maxAckPending unacknowledged events, so the queue never fills and
	// the callback never blocks.
	queued := make(chan jetstream.Msg, maxAckPending)
	cc, err := cons.Consume(func(m jetstream.Msg) { queued <- m })
	if err != nil {
		return fmt.Errorf("consume webhook events: %w", err)
	}
	for {
		var m jetstream.Msg
		select {
		case <-ctx.Done():
		case m = <-queued:
		}
		// Checked whichever case ran: select picks at random between
		// ready cases, and a batch now would only fail and come back
		// after a pause.
		if ctx.Err() != nil {
			if m != nil {
				_ = m.Nak()
			}
			giveBack(cc, queued)
			return nil
		}
		batch := []jetstream.Msg{m}
	gather:
		for len(batch) < fanoutBatch {
			select {
			case m := <-queued:
				batch = append(batch, m)
			default:
				break gather
			}
		}
		f.handleBatch(ctx, batch, log)
	}
}

// giveBack stops consuming and NAKs every event received and not yet
// handled, so that another replica (or this one, restarted) gets them at
// once rather than after AckWait. Draining hands the events still in the
// client's buffer to the callback first, which queues them too.
func giveBack(cc jetstream.ConsumeContext, queued <-chan jetstream.Msg) {
	cc.Drain()
	select {
	case <-cc.Closed():
	case <-time.After(5 * time.Second): // the server went away: AckWait returns the rest
	}
	for {
		select {
		case m := <-queued:
			_ = m.Nak()
		default:
			return
		}
	}
}

// handleBatch fans msgs out in one transaction and acknowledges them once
// it committed. When PostgreSQL refused something of one event, each event
// is tried alone, so an event that cannot be recorded holds back only
// itself; otherwise the batch is redelivered after a pause as a whole. A
// message that is not an event is never redelivered.
func (f *Fanout) handleBatch(ctx context.Context, msgs []jetstream.Msg, log *slog.Logger) {
	events := make([]Event, 0, len(msgs))
	withEvent := make([]jetstream.Msg, 0, len(msgs))
	for _, m := range msgs {
		id, tid, err := natsbus.EventOf(m)
		if err != nil {
			_ = m.Term()
			continue
		}
		h := m.Headers()
		events = append(events, Event{TenantID: tid, ID: id, Type: h.Get(natsbus.HeaderEventType), Body: m.Data(),
			TraceID: h.Get(natsbus.HeaderTraceID), RequestedBy: natsbus.RequestedByOf(m)})
		withEvent = append(withEvent, m)
	}
	if len(events) == 0 {
		return
	}
	_, err := f.HandleEvents(ctx, events)
	if err == nil {
		for _, m := range withEvent {
			_ = m.Ack()
		}
		return
	}
	if len(events) > 1 && ctx.Err() == nil && ofOneEvent(err) {
		for i := range events {
			f.handleBatch(ctx, withEvent[i:i+1], log)
		}
		return
	}
	if ctx.Err() == nil {
		log.Error("webhook fan-out", "first_event_id", events[0].ID, "tenant_id", events[0].TenantID,
			"events", len(events), "err", err)
	}
	for _, m := range withEvent {
		_ = m.NakWithDelay(5 * time.Second)
	}
}

// ofOneEvent reports whether err may be about one event of a batch rather
// than the database as a whole: PostgreSQL refused a value (data exception)
// or a row (integrity constraint). Anything else (a lost connection, a
// timeout) would fail each event alone too, so the batch waits as one.
func ofOneEvent(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (strings.HasPrefix(pg.Code, "22") || strings.HasPrefix(pg.Code, "23"))
}

func (f *Fanout) logger() *slog.Logger {
	if f.Logger == nil {
		return slog.Default()
	}
	return f.Logger
}
