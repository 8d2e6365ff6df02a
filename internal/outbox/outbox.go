// Package outbox is Jejak's transactional outbox: domain code publishes an
// event in the same transaction as the change it describes (no network call
// inside it), and relays on every replica claim committed messages with
// FOR UPDATE SKIP LOCKED, hand them to a Sink (NATS JetStream in
// production), and mark them delivered. Delivery is at least once and in
// order per aggregate; different aggregates flow in parallel. Every reading
// of time comes from an injected clock.Clock. See docs/outbox.md.
package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
)

// State is an outbox message's state; a CHECK constraint admits only these.
type State string

// Message states.
const (
	StatePending    State = "pending"
	StateProcessing State = "processing"
	StateDelivered  State = "delivered"
	StateFailed     State = "failed"
)

// Message is one domain event to publish.
type Message struct {
	// Type names the event, e.g. "project.deleted"; it becomes the last
	// tokens of the NATS subject jejak.<tenant>.<type>.
	Type string
	// AggregateType and AggregateID name the entity the event is about;
	// messages of one aggregate are delivered in publish (commit) order.
	AggregateType string
	AggregateID   string
	// Payload is a JSON object: json.RawMessage or []byte are taken as
	// they are (and validated), anything else is marshalled.
	Payload any
	// TraceID links the event to the request or job that caused it.
	TraceID string
	// RequestedBy is the user whose action the event reports (nil: the
	// system's own). The webhook deliveries the event causes are done on
	// their behalf.
	RequestedBy *int64
}

// MaxPayload bounds one message's payload.
const MaxPayload = 256 << 10

// ErrInvalid means the message was refused before touching the database.
var ErrInvalid = errors.New("invalid outbox message")

// typePattern is also the database's CHECK: dot-separated lower-case
// tokens, each a valid NATS subject token.
var typePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*$`)

// ValidType reports whether s is a well-formed event type.
func ValidType(s string) bool { return len(s) <= 100 && typePattern.MatchString(s) }

// Writer publishes messages inside callers' transactions.
type Writer struct {
	clk clock.Clock
}

// NewWriter returns a Writer stamping messages with clk's time (nil =
// the database's now()).
func NewWriter(clk clock.Clock) *Writer {
	if clk == nil {
		clk = clock.Database{}
	}
	return &Writer{clk: clk}
}

// Publish adds m to the outbox inside tx (a tenant-scoped jejak_app
// transaction for tenantID, or a jejak_system one), so the message exists
// if and only if tx commits. It sends nothing over the network; relays do.
// It takes a transaction-scoped lock on m's aggregate until tx ends, so
// concurrent publishers to one aggregate are ordered by commit.
func (w *Writer) Publish(ctx context.Context, tx database.Querier, tenantID int64, m Message) (int64, error) {
	payload, err := m.validate(tenantID)
	if err != nil {
		return 0, err
	}
	id, err := storeInsert(ctx, tx, w.clk.Now(), tenantID, m, payload)
	if err != nil {
		return 0, fmt.Errorf("publish %s for tenant %d: %w", m.Type, tenantID, err)
	}
	database.WakeAfterCommit(tx, outboxChannel)
	return id, nil
}

// PublishMany is Publish for many messages of one tenant, added by one
// statement in the order given. Every message is validated before any is
// written. The aggregates' locks are taken together, in key order.
func (w *Writer) PublishMany(ctx context.Context, tx database.Querier, tenantID int64, ms []Message) error {
	if len(ms) == 0 {
		return nil
	}
	payloads := make([]json.RawMessage, len(ms))
	for i := range ms {
		p, err := ms[i].validate(tenantID)
		if err != nil {
			return err
		}
		payloads[i] = p
	}
	if err := storeInsertMany(ctx, tx, w.clk.Now(), tenantID, ms, payloads); err != nil {
		return fmt.Errorf("publish %d messages for tenant %d: %w", len(ms), tenantID, err)
	}
	database.WakeAfterCommit(tx, outboxChannel)
	return nil
}

func (m *Message) validate(tenantID int64) (json.RawMessage, error) {
	bad := func(field, msg string) error {
		return fmt.Errorf("%w: %w", ErrInvalid, apperr.Invalid(field, msg))
	}
	if tenantID <= 0 {
		return nil, bad("tenant", "tenant id must be positive")
	}
	if !ValidType(m.Type) {
		return nil, bad("type", "event type must be dot-separated lower-case words, e.g. project.deleted")
	}
	if m.AggregateType == "" || len(m.AggregateType) > 100 || !utf8.ValidString(m.AggregateType) {
		return nil, bad("aggregate_type", "aggregate type must be 1 to 100 characters")
	}
	if m.AggregateID == "" || len(m.AggregateID) > 200 || !utf8.ValidString(m.AggregateID) {
		return nil, bad("aggregate_id", "aggregate id must be 1 to 200 characters")
	}
	if len(m.TraceID) > 200 {
		return nil, bad("trace_id", "trace id is too long")
	}
	var raw []byte
	switch p := m.Payload.(type) {
	case nil:
		raw = []byte("{}")
	case json.RawMessage:
		raw = p
	case []byte:
		raw = p
	default:
		var err error
		if raw, err = json.Marshal(p); err != nil {
			return nil, bad("payload", "payload cannot be encoded as JSON: "+err.Error())
		}
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) > MaxPayload {
		return nil, bad("payload", "payload is larger than 256 KiB")
	}
	if !json.Valid(raw) || len(raw) == 0 || raw[0] != '{' {
		return nil, bad("payload", "payload must be a JSON object")
	}
	if bytes.Contains(raw, []byte(`\u0000`)) {
		return nil, bad("payload", "payload must not contain NUL characters")
	}
	return raw, nil
}

// Envelope is a claimed message as a Sink receives it.
type Envelope struct {
	ID            int64
	TenantID      int64
	TenantSlug    string
	Type          string
	AggregateType string
	AggregateID   string
	Payload       json.RawMessage
	TraceID       string
	RequestedBy   *int64 // the user whose action the event reports
	CreatedAt     time.Time
	Attempt       int // 1 on the first publish
}

// EventID is the event's public identity, the same in NATS messages and
// webhook deliveries: "evt_" + the outbox id.
func (e *Envelope) EventID() string { return EventID(e.ID) }

// EventID formats an outbox id as a public event id.
func EventID(id int64) string { return fmt.Sprintf("evt_%d", id) }

// Body is the JSON document published for an event.
type Body struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Tenant    string          `json:"tenant"`
	TenantID  int64           `json:"tenant_id"`
	Aggregate BodyAggregate   `json:"aggregate"`
	TraceID   string          `json:"trace_id,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	Data      json.RawMessage `json:"data"`
}

// BodyAggregate names the entity of an event body.
type BodyAggregate struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Body returns the document published for e.
func (e *Envelope) Body() ([]byte, error) {
	return json.Marshal(Body{
		ID: e.EventID(), Type: e.Type, Tenant: e.TenantSlug, TenantID: e.TenantID,
		Aggregate: BodyAggregate{Type: e.AggregateType, ID: e.AggregateID},
		TraceID:   e.TraceID, CreatedAt: e.CreatedAt.UTC(), Data: e.Payload,
	})
}

// Sink delivers claimed messages somewhere (NATS JetStream in production).
// Publish returns one error per message, nil for delivered ones; a message
// the sink already had (a duplicate) counts as delivered.
type Sink interface {
	Publish(ctx context.Context, msgs []Envelope) []error
}

// NoSink accepts every message: with no broker configured, the relay still
// runs and marks messages delivered to nothing.
type NoSink struct{}

// Publish accepts msgs.
func (NoSink) Publish(_ context.Context, msgs []Envelope) []error { return make([]error, len(msgs)) }
