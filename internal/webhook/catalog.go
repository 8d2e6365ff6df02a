package webhook

import "slices"

// EventType is one kind of event an endpoint can subscribe to, with an
// example of its data (the "data" member of the body).
type EventType struct {
	Type    string
	Example string
}

// Catalog is every event type Jejak publishes to tenant webhooks, sorted
// by type. Endpoints subscribe to these (or "*"); the webhooks page lists
// them with their examples.
var Catalog = []EventType{
	{"job.dead_letter.discarded", `{"job_id":48,"kind":"email.weekly-report","reason":"customer left","operator_user_id":7}`},
	{"job.dead_letter.retried", `{"job_id":48,"kind":"email.weekly-report","reason":"SMTP fixed","operator_user_id":7}`},
	{"membership.changed", `{"user_id":12,"actor_user_id":3,"from_role":"member","to_role":"admin"}`},
	{"plan.changed", `{"subscription_id":9,"actor_user_id":3,"from_plan":"pro","to_plan":"basic"}`},
	{"points.awarded", `{"customer":"cust-42","points":10,"reason":"order 1001","message_id":"msg-1001"}`},
	{"project.created", `{"project_id":8,"actor_user_id":3,"name":"Katalog Musim Hujan"}`},
	{"project.deleted", `{"project_id":8,"actor_user_id":3,"name":"Katalog Musim Hujan"}`},
	{EventEndpointDisabled, `{"endpoint_id":5,"url":"https://example.com/hook","reason":"every attempt failed for days: disabled automatically","delivery_id":311,"consecutive_failures":40,"failing_since":"2026-11-28T09:00:00Z"}`},
}

// KnownEventType reports whether t is in the Catalog.
func KnownEventType(t string) bool {
	return slices.ContainsFunc(Catalog, func(e EventType) bool { return e.Type == t })
}
