package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/database"
)

// EventType is one kind of event an endpoint can subscribe to: the JSON
// Schema of its data (the "data" member of the body) and an example.
type EventType struct {
	Type    string
	Schema  string
	Example string
}

// objectSchema is the JSON Schema (2020-12) of an object whose every
// listed property ("name:type") is required; more properties may come.
func objectSchema(props ...string) string {
	type prop struct {
		Type string `json:"type"`
	}
	ps := map[string]prop{}
	req := make([]string, 0, len(props))
	for _, p := range props {
		name, typ, _ := strings.Cut(p, ":")
		ps[name] = prop{typ}
		req = append(req, name)
	}
	b, _ := json.Marshal(map[string]any{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
		"required": req, "properties": ps})
	return string(b)
}

// Catalog is every event type Jejak publishes to tenant webhooks, sorted
// by type. Endpoints subscribe to these (or "*"); the webhooks page lists
// them with their schemas and examples.
var Catalog = []EventType{
	{"job.dead_letter.discarded", objectSchema("job_id:integer", "kind:string", "reason:string", "operator_user_id:integer"),
		`{"job_id":48,"kind":"email.weekly-report","reason":"customer left","operator_user_id":7}`},
	{"job.dead_letter.retried", objectSchema("job_id:integer", "kind:string", "reason:string", "operator_user_id:integer"),
		`{"job_id":48,"kind":"email.weekly-report","reason":"SMTP fixed","operator_user_id":7}`},
	{"membership.changed", objectSchema("user_id:integer", "actor_user_id:integer", "from_role:string", "to_role:string"),
		`{"user_id":12,"actor_user_id":3,"from_role":"member","to_role":"admin"}`},
	{"plan.changed", objectSchema("subscription_id:integer", "actor_user_id:integer", "from_plan:string", "to_plan:string"),
		`{"subscription_id":9,"actor_user_id":3,"from_plan":"pro","to_plan":"basic"}`},
	{"points.awarded", objectSchema("customer:string", "points:integer", "reason:string", "message_id:string"),
		`{"customer":"cust-42","points":10,"reason":"order 1001","message_id":"msg-1001"}`},
	{"project.created", objectSchema("project_id:integer", "actor_user_id:integer", "name:string"),
		`{"project_id":8,"actor_user_id":3,"name":"Katalog Musim Hujan"}`},
	{"project.deleted", objectSchema("project_id:integer", "actor_user_id:integer", "name:string"),
		`{"project_id":8,"actor_user_id":3,"name":"Katalog Musim Hujan"}`},
	{EventEndpointDisabled, objectSchema("endpoint_id:integer", "url:string", "reason:string", "delivery_id:integer", "consecutive_failures:integer"),
		`{"endpoint_id":5,"url":"https://example.com/hook","reason":"every attempt failed for days: disabled automatically","delivery_id":311,"consecutive_failures":40,"failing_since":"2026-11-28T09:00:00Z"}`},
}

// KnownEventType reports whether t is in the Catalog.
func KnownEventType(t string) bool {
	return slices.ContainsFunc(Catalog, func(e EventType) bool { return e.Type == t })
}

// eventID is the webhook-id of a delivery's event: "evt_<outbox id>", or
// "evt_test_<n>" for a test event (stored with a negative id, so it never
// meets a real event's).
func eventID(id int64) string {
	if id < 0 {
		return "evt_test_" + strconv.FormatInt(-id, 10)
	}
	return "evt_" + strconv.FormatInt(id, 10)
}

// SendTest delivers the catalog's example of eventType to the endpoint,
// signed like any delivery, and returns the delivery; it is audited.
func (s *Service) SendTest(ctx context.Context, tenantID int64, actor Actor, endpointID int64, eventType string) (Delivery, error) {
	if !actor.canManage() {
		return Delivery{}, ErrReadOnly
	}
	i := slices.IndexFunc(Catalog, func(e EventType) bool { return e.Type == eventType })
	if i < 0 {
		return Delivery{}, apperr.Invalid("type", "Choose an event type from the catalog.")
	}
	var d Delivery
	err := database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		st := newStore(tx)
		ep, err := st.endpoint(ctx, tenantID, endpointID)
		if err != nil {
			return err
		}
		now, err := dbNow(ctx, tx, s.clk)
		if err != nil {
			return err
		}
		id := -now.UnixMicro()
		body, err := json.Marshal(map[string]any{"id": eventID(id), "type": eventType, "tenant_id": tenantID, "test": true,
			"aggregate": map[string]string{"type": "test", "id": "test"}, "created_at": now.UTC().Format(time.RFC3339Nano),
			"data": json.RawMessage(Catalog[i].Example)})
		if err != nil {
			return fmt.Errorf("encode test event: %w", err)
		}
		dids, needJob, err := st.insertDeliveries(ctx, []newDelivery{{TenantID: tenantID, EndpointID: ep.ID, EventID: id,
			EventType: eventType, Body: string(body), RequestedBy: &actor.UserID, TraceID: actor.TraceID}}, s.clk.Now())
		if err != nil {
			return fmt.Errorf("record test delivery: %w", err)
		}
		did := dids[0]
		if needJob[0] { // else held behind the endpoint's open breaker
			if _, err := enqueueAttempt(ctx, tx, s.jobs, tenantID, did, nil, actor.TraceID, &actor.UserID, firstAttemptKey(id, ep.ID)); err != nil {
				return err
			}
		}
		if d, err = st.delivery(ctx, tenantID, did); err != nil {
			return err
		}
		return s.record(ctx, tx, tenantID, actor, "webhook.endpoint.test", ep.ID, map[string]any{"url": ep.URL, "event_type": eventType})
	})
	return d, err
}
