package tenant

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/outbox"
)

// domainEvents maps the audited changes that other systems care about to
// the event published through the outbox in the same transaction, and the
// aggregate whose events must stay in order.
var domainEvents = map[string]struct{ event, aggregate string }{
	"project.create":      {"project.created", "project"},
	"project.delete":      {"project.deleted", "project"},
	"subscription.change": {"plan.changed", "tenant"},
	"membership.set":      {"membership.changed", "membership"},
}

// publish adds the domain event of an audited change to the outbox, in
// the change's transaction; changes without an event publish nothing.
func (s *Service) publish(ctx context.Context, tx pgx.Tx, tenantID int64, actor Actor, action, entity string, entityID int64, detail map[string]any) error {
	ev, ok := domainEvents[action]
	if !ok {
		return nil
	}
	aggID := strconv.FormatInt(entityID, 10)
	if ev.aggregate == "tenant" {
		// Plan changes of one tenant are one ordered story.
		aggID = strconv.FormatInt(tenantID, 10)
	}
	payload := map[string]any{entity + "_id": entityID, "actor_user_id": actor.UserID}
	for k, v := range detail {
		payload[k] = v
	}
	// Nothing in the transaction reads the message back: it is sent with
	// the COMMIT, in the same round trip (as the audit event is).
	var requestedBy *int64
	if actor.UserID > 0 {
		requestedBy = &actor.UserID
	}
	return s.outbox.PublishMany(ctx, database.AtCommit(tx), tenantID, []outbox.Message{{Type: ev.event,
		AggregateType: ev.aggregate, AggregateID: aggID, Payload: payload, TraceID: actor.TraceID, RequestedBy: requestedBy}})
}
