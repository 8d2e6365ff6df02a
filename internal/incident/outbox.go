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
			Title: m.eventType + " written to the outbox",
			Detail: m.aggregate + " · evt_" + strconv.FormatInt(m.id, 10) + " · " + m.state + " after " +
				strconv.Itoa(m.attempts) + " attempts",
			Error: m.lastError, Link: "/admin/outbox"})
		if m.processedAt != nil {
			out = append(out, Entry{At: *m.processedAt, Kind: KindOutbox, TenantID: m.tenantID, Actor: "relay",
				Title: m.eventType + " published", Detail: "evt_" + strconv.FormatInt(m.id, 10), Link: "/admin/outbox"})
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
		detail := d.state + " after " + strconv.Itoa(d.attempts) + " attempts"
		if d.lastStatus != nil {
			detail += ", last HTTP " + strconv.Itoa(*d.lastStatus)
		}
		out = append(out, Entry{At: d.createdAt, Kind: KindDelivery, TenantID: d.tenantID, Actor: "system",
			Title: d.eventType + " → " + d.url, Detail: detail + " · evt_" + strconv.FormatInt(d.eventID, 10), Error: d.lastError})
	}
	return out, nil
}
