package incident

import (
	"strconv"

	"github.com/jejakhq/jejak/internal/ptr"
)

// outboxEntries are a trace's outbox messages (written, published or
// failed) and their webhook deliveries on the timeline.
func outboxEntries(msgs []outboxRow, deliveries []deliveryRow) []Entry {
	var out []Entry
	for _, m := range msgs {
		out = append(out, Entry{At: m.CreatedAt, Kind: KindOutbox, TenantID: m.TenantID, Actor: "system",
			Title:  text("incident.t.outbox_written", m.EventType),
			Detail: []Text{raw(m.AggregateType + " " + m.AggregateID), raw("evt_" + id(m.ID)), text("incident.t.after_attempts", Code{"outbox_state", m.State}, m.Attempts)},
			Error:  ptr.Value(m.LastError), Link: "/admin/outbox"})
		if m.ProcessedAt != nil {
			out = append(out, Entry{At: *m.ProcessedAt, Kind: KindOutbox, TenantID: m.TenantID, Actor: "relay",
				Title: text("incident.t.outbox_published", m.EventType), Detail: []Text{raw("evt_" + id(m.ID))}, Link: "/admin/outbox"})
		}
	}
	for _, d := range deliveries {
		detail := text("incident.t.after_attempts", Code{"delivery", d.State}, d.Attempts)
		if d.LastStatus != nil {
			detail = text("incident.t.after_attempts_http", Code{"delivery", d.State}, d.Attempts, strconv.Itoa(*d.LastStatus))
		}
		out = append(out, Entry{At: d.CreatedAt, Kind: KindDelivery, TenantID: d.TenantID, Actor: "system",
			Title: raw(d.EventType + " → " + d.URL), Detail: []Text{detail, raw("evt_" + id(d.EventID))}, Error: ptr.Value(d.LastError)})
	}
	return out
}
