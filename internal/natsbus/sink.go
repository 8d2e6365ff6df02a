package natsbus

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jejakhq/jejak/internal/outbox"
)

// Headers Jejak sets on every event besides Nats-Msg-Id.
const (
	HeaderTenantID  = "Jejak-Tenant-Id"
	HeaderEventID   = "Jejak-Event-Id"
	HeaderEventType = "Jejak-Event-Type"
	HeaderTraceID   = "Jejak-Trace-Id"
	// HeaderRequestedBy is the id of the user whose action the event
	// reports (absent for the system's own events).
	HeaderRequestedBy = "Jejak-Requested-By"
)

// Sink publishes outbox messages to JetStream asynchronously, a whole batch
// in flight at once, with the outbox id as Nats-Msg-Id so the stream drops
// re-publishes inside its duplicate window.
type Sink struct {
	JS jetstream.JetStream
}

// Publish sends msgs and waits for every acknowledgement or ctx's end. A
// Duplicate acknowledgement means the stream already holds the message:
// delivered.
func (s Sink) Publish(ctx context.Context, msgs []outbox.Envelope) []error {
	errs := make([]error, len(msgs))
	futs := make([]jetstream.PubAckFuture, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		body, err := m.Body()
		if err != nil {
			errs[i] = fmt.Errorf("encode event: %w", err)
			continue
		}
		nm := nats.NewMsg(Subject(m.TenantSlug, m.Type))
		nm.Data = body
		nm.Header.Set(jetstream.MsgIDHeader, strconv.FormatInt(m.ID, 10))
		nm.Header.Set(HeaderTenantID, strconv.FormatInt(m.TenantID, 10))
		nm.Header.Set(HeaderEventID, m.EventID())
		nm.Header.Set(HeaderEventType, m.Type)
		if m.TraceID != "" {
			nm.Header.Set(HeaderTraceID, m.TraceID)
		}
		if m.RequestedBy != nil {
			nm.Header.Set(HeaderRequestedBy, strconv.FormatInt(*m.RequestedBy, 10))
		}
		if futs[i], err = s.JS.PublishMsgAsync(nm); err != nil {
			errs[i] = fmt.Errorf("publish to JetStream: %w", err)
		}
	}
	for i, f := range futs {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs[i] = fmt.Errorf("JetStream publish: %w", err)
		case <-ctx.Done():
			errs[i] = fmt.Errorf("JetStream acknowledgement: %w", ctx.Err())
		}
	}
	return errs
}

// ErrNoHeader is returned by EventOf for a message Jejak did not publish.
var ErrNoHeader = errors.New("message lacks Jejak's event headers")

// EventOf reads the outbox id and tenant of a consumed event.
func EventOf(msg jetstream.Msg) (id, tenantID int64, err error) {
	h := msg.Headers()
	if id, err = strconv.ParseInt(h.Get(jetstream.MsgIDHeader), 10, 64); err != nil {
		return 0, 0, ErrNoHeader
	}
	if tenantID, err = strconv.ParseInt(h.Get(HeaderTenantID), 10, 64); err != nil {
		return 0, 0, ErrNoHeader
	}
	return id, tenantID, nil
}

// RequestedByOf reads the user whose action a consumed event reports (nil:
// the system's own, or a header that is not a user id).
func RequestedByOf(msg jetstream.Msg) *int64 {
	uid, err := strconv.ParseInt(msg.Headers().Get(HeaderRequestedBy), 10, 64)
	if err != nil || uid <= 0 {
		return nil
	}
	return &uid
}
