package components

import (
	"bytes"
	"context"
	"io"
	"slices"
	"sync"

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
		k := chartKey{lang: i18n.Lang(ctx), zone: reqctx.ViewerFrom(ctx).Location().String(), sum: minutesSum(ms)}
		if b, ok := throughputCache.get(k, ms); ok {
			_, err := w.Write(b)
			return err
		}
		var buf bytes.Buffer
		if err := throughputChart(ms).Render(ctx, &buf); err != nil {
			return err
		}
		throughputCache.put(k, ms, buf.Bytes())
		_, err := w.Write(buf.Bytes())
		return err
	})
}

// chartKey is what a chart's bytes depend on: the language of its titles,
// the zone its minutes are read in and (as a checksum) its minutes.
type chartKey struct {
	lang, zone string
	sum        uint64
}

// minutesSum is FNV-1a over the minutes' instants and counts.
func minutesSum(ms []ChartMinute) uint64 {
	h := uint64(14695981039346656037)
	for _, m := range ms {
		for _, v := range [...]int64{m.Minute.UnixNano(), m.Succeeded, m.Failed} {
			for i := 0; i < 64; i += 8 {
				h = (h ^ uint64(byte(v>>i))) * 1099511628211
			}
		}
	}
	return h
}

// chartCacheSize bounds the cache: when full it starts again, which costs
// one render per chart in use.
const chartCacheSize = 64

type chartEntry struct {
	ms  []ChartMinute
	svg []byte
}

// chartCache keeps recently rendered charts. An entry is used only for
// exactly the minutes it was rendered from (the checksum picks it, the
// minutes themselves decide).
type chartCache struct {
	mu sync.Mutex
	m  map[chartKey]chartEntry
}

var throughputCache chartCache

func (c *chartCache) get(k chartKey, ms []ChartMinute) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !slices.EqualFunc(e.ms, ms, sameMinute) {
		return nil, false
	}
	return e.svg, true
}

func (c *chartCache) put(k chartKey, ms []ChartMinute, svg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= chartCacheSize {
		c.m = make(map[chartKey]chartEntry, chartCacheSize)
	}
	c.m[k] = chartEntry{ms: slices.Clone(ms), svg: slices.Clone(svg)}
}

// sameMinute compares instants, not time.Time values: a minute read back
// from PostgreSQL and one from the cache may carry different locations.
func sameMinute(a, b ChartMinute) bool {
	return a.Minute.Equal(b.Minute) && a.Succeeded == b.Succeeded && a.Failed == b.Failed
}
