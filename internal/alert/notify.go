package alert

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/outbox"
)

// EventType is the outbox event type of an alert transition; the staff
// webhook endpoint subscribes to it.
const EventType = "alert.transition"

// AlertsPath is the staff page a notification links to.
const AlertsPath = "/admin/alerts"

// Notifier writes every transition as an outbox message of the system
// tenant, in the transaction that records the transition: the relay,
// JetStream, the webhook fan-out and webhook.deliver carry it to the staff
// endpoint like any tenant event, and nothing goes over the network while
// the evaluation's transaction is open.
type Notifier struct {
	tenantID int64
	outbox   *outbox.Writer
}

// NewNotifier returns a Notifier publishing as systemTenantID (the tenant
// webhook.SyncSystemEndpoint reports), stamped with clk's time.
func NewNotifier(systemTenantID int64, clk clock.Clock) *Notifier {
	return &Notifier{tenantID: systemTenantID, outbox: outbox.NewWriter(clk)}
}

// Hook is the Notifier as Config.OnTransition; nil for a nil Notifier (no
// staff webhook configured), so nothing is published.
func (n *Notifier) Hook() func(ctx context.Context, tx pgx.Tx, t Transition) error {
	if n == nil {
		return nil
	}
	return n.OnTransition
}

// Payload is the body's "data" object of an alert.transition event.
type Payload struct {
	TransitionID int64     `json:"transition_id"`
	Rule         string    `json:"rule"`
	From         string    `json:"from"`  // ok, pending, firing
	State        string    `json:"state"` // pending, firing, resolved
	Value        float64   `json:"value"`
	Threshold    float64   `json:"threshold"`
	Summary      string    `json:"summary"`
	StartedAt    time.Time `json:"started_at"` // when the rule entered the state it leaves
	At           time.Time `json:"at"`
	Link         string    `json:"link"` // path of the staff alerts page
}

// OnTransition publishes t and links the recorded transition to the
// message, so the alerts page can show how the notification fared.
func (n *Notifier) OnTransition(ctx context.Context, tx pgx.Tx, t Transition) error {
	p := Payload{TransitionID: t.ID, Rule: t.Rule, From: t.From, State: t.State, Value: t.Value,
		Threshold: t.Threshold, Summary: t.Summary, StartedAt: t.StartedAt.UTC(), At: t.At.UTC(), Link: AlertsPath}
	// One aggregate per rule: a rule's transitions reach NATS consumers in
	// order (webhook deliveries are not ordered; receivers order by "at").
	id, err := n.outbox.Publish(ctx, tx, n.tenantID, outbox.Message{Type: EventType,
		AggregateType: "alert_rule", AggregateID: t.Rule, Payload: p})
	if err != nil {
		return fmt.Errorf("publish alert transition: %w", err)
	}
	return newStore(tx).setEventOutbox(ctx, t.ID, id)
}
