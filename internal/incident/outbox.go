package incident

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// OutboxSource adds a trace's outbox messages (written, published or
// failed) and their webhook deliveries to the timeline, through the
// outbox trace index and the deliveries' event index.
func OutboxSource(ctx context.Context, tx pgx.Tx, traceID string, limit int) ([]Entry, error) {
	st := newStore(tx)
	msgs, err := st.outbox(ctx, traceID, limit)
	if err != nil {
		return nil, err
	}
	var out []Entry
	ids := make([]int64, 0, len(msgs))
	for _, m := range msgs {
		ids = append(ids, m.id)
		out = append(out, Entry{At: m.createdAt, Kind: KindOutbox, TenantID: m.tenantID, Actor: "system",
			Title:  text("incident.t.outbox_written", m.eventType),
			Detail: []Text{raw(m.aggregate), raw("evt_" + id(m.id)), text("incident.t.after_attempts", Code{"outbox_state", m.state}, m.attempts)},
			Error:  m.lastError, Link: "/admin/outbox"})
		if m.processedAt != nil {
			out = append(out, Entry{At: *m.processedAt, Kind: KindOutbox, TenantID: m.tenantID, Actor: "relay",
				Title: text("incident.t.outbox_published", m.eventType), Detail: []Text{raw("evt_" + id(m.id))}, Link: "/admin/outbox"})
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	ds, err := st.deliveries(ctx, ids, limit)
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		detail := text("incident.t.after_attempts", Code{"delivery", d.state}, d.attempts)
		if d.lastStatus != nil {
			detail = text("incident.t.after_attempts_http", Code{"delivery", d.state}, d.attempts, strconv.Itoa(*d.lastStatus))
		}
		out = append(out, Entry{At: d.createdAt, Kind: KindDelivery, TenantID: d.tenantID, Actor: "system",
			Title: raw(d.eventType + " → " + d.url), Detail: []Text{detail, raw("evt_" + id(d.eventID))}, Error: d.lastError})
	}
	return out, nil
}
