package components

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/reqctx"
)

func hourOfMinutes(start time.Time) []ChartMinute {
	ms := make([]ChartMinute, 60)
	for i := range ms {
		ms[i] = ChartMinute{Minute: start.Add(time.Duration(i) * time.Minute), Succeeded: int64(i * 7 % 50), Failed: int64(i % 3)}
	}
	return ms
}

func renderString(t *testing.T, ctx context.Context, render func(context.Context, io.Writer) error) string {
	t.Helper()
	var b bytes.Buffer
	if err := render(ctx, &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestThroughputChartCacheServesOnlyItsInputs: each chart served through
// the cache is byte for byte the chart rendered afresh, when the same hour
// comes again and when a count, the language or the zone differs from the
// chart cached before it.
func TestThroughputChartCacheServesOnlyItsInputs(t *testing.T) {
	jakarta, err := time.LoadLocation("Asia/Jakarta")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 5, 17, 0, 0, 0, time.UTC)
	base := hourOfMinutes(start)
	oneMore := hourOfMinutes(start)
	oneMore[42].Failed++
	en := i18n.WithLang(context.Background(), "en")
	cases := []struct {
		name string
		ctx  context.Context
		ms   []ChartMinute
	}{
		{"base", en, base},
		{"base again", en, hourOfMinutes(start)},
		{"one failure more", en, oneMore},
		{"base after it", en, base},
		{"in Indonesian", i18n.WithLang(context.Background(), i18n.ID), base},
		{"in Jakarta", reqctx.WithViewer(en, &reqctx.Viewer{Zone: jakarta}), base},
		{"read back in another location", en, hourOfMinutes(start.In(jakarta))},
	}
	first := ""
	for _, c := range cases {
		got := renderString(t, c.ctx, ThroughputChart("jobs", c.ms).Render)
		want := renderString(t, c.ctx, throughputChart(c.ms).Render)
		if got != want {
			t.Fatalf("%s: the cached chart differs from a fresh render", c.name)
		}
		switch {
		case first == "":
			first = got
		case c.name == "base again" || c.name == "base after it" || c.name == "read back in another location":
			if got != first {
				t.Fatalf("%s: the same hour rendered differently", c.name)
			}
		case got == first:
			t.Fatalf("%s: renders as the base chart, so the case tests nothing", c.name)
		}
	}
}

// TestThroughputChartCacheRendersOnce: a chart served again is written
// from the cache, not laid out again (a render allocates per bar).
func TestThroughputChartCacheRendersOnce(t *testing.T) {
	ctx := i18n.WithLang(context.Background(), "en")
	ms := hourOfMinutes(time.Date(2026, 12, 5, 18, 0, 0, 0, time.UTC))
	fresh := testing.AllocsPerRun(5, func() { _ = throughputChart(ms).Render(ctx, io.Discard) })
	_ = ThroughputChart("jobs", ms).Render(ctx, io.Discard)
	cached := testing.AllocsPerRun(5, func() { _ = ThroughputChart("jobs", ms).Render(ctx, io.Discard) })
	if fresh < 100 || cached*50 > fresh {
		t.Fatalf("allocations per render: %v afresh, %v cached; want the cached one to skip the layout", fresh, cached)
	}
}
