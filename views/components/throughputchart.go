package components

import (
	"context"
	"io"
	"strconv"

	"github.com/a-h/templ"

	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/reqctx"
)

// ThroughputChart renders throughputChart once per distinct hour, language
// and zone; of names what it counts (jobs, deliveries), a slot of its own
// in the memo. Its callers serve one cached snapshot to every staff member
// until the snapshot is refreshed, and laying out and formatting its sixty
// bars was a third of the staff overview's CPU per request.
func ThroughputChart(of string, ms []ChartMinute) templ.Component {
	return templ.ComponentFunc(func(ctx context.Context, w io.Writer) error {
		slot := "throughput\x00" + of + "\x00" + i18n.Lang(ctx) + "\x00" + reqctx.ViewerFrom(ctx).Location().String()
		inputs := make([]byte, 0, len(ms)*48)
		for _, m := range ms {
			inputs = strconv.AppendInt(inputs, m.Minute.UnixNano(), 10)
			inputs = strconv.AppendInt(append(inputs, ' '), m.Succeeded, 10)
			inputs = strconv.AppendInt(append(inputs, ' '), m.Failed, 10)
			inputs = append(inputs, 0)
		}
		return Fragments.Component(slot, string(inputs), func() templ.Component { return throughputChart(ms) }).Render(ctx, w)
	})
}
