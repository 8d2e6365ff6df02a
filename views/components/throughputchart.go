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
// and zone. Its callers serve one cached snapshot to every staff member
// until the snapshot is refreshed, and laying out and formatting its sixty
// bars was a third of the staff overview's CPU per request.
func ThroughputChart(ms []ChartMinute) templ.Component {
	return templ.ComponentFunc(func(ctx context.Context, w io.Writer) error {
		key := append(make([]byte, 0, 64+len(ms)*48), "throughput\x00"...)
		key = append(key, i18n.Lang(ctx)...)
		key = append(append(key, 0), reqctx.ViewerFrom(ctx).Location().String()...)
		for _, m := range ms {
			key = strconv.AppendInt(append(key, 0), m.Minute.UnixNano(), 10)
			key = strconv.AppendInt(append(key, ' '), m.Succeeded, 10)
			key = strconv.AppendInt(append(key, ' '), m.Failed, 10)
		}
		return Fragments.Component(string(key), func() templ.Component { return throughputChart(ms) }).Render(ctx, w)
	})
}
