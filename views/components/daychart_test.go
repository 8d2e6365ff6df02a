package components_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/golden"
	"github.com/jejakhq/jejak/views/components"
)

// goldenCharts are day charts that reach every branch of the drawing:
// stacked series with a legend and both axis lines, one series with its
// own number format, a month of nothing, no days at all, and text that
// must be escaped in every place text lands.
func goldenCharts() map[string]components.DayChart {
	stacked := components.DayChart{
		ID: "jobs-chart", Title: `Jobs & "runs" <30 days>`, Description: "Most on Sen 10 Nov: 40 succeeded, 3 failed.",
		Classes: []string{"ok", "bad", "dead"}, Series: []string{"succeeded", "failed", `dead <x>`},
		DayHeading: "Day", TableLabel: "Show the numbers",
	}
	for i := range 30 {
		v := []int64{int64(i * i % 41), int64(i % 4), int64(i % 7 / 6)}
		if i == 3 {
			v = []int64{0, 0, 0}
		}
		stacked.Bars = append(stacked.Bars, components.DayBar{
			Key: fmt.Sprintf("2026-11-%02d", i+1), Label: fmt.Sprintf("Sen %d Nov", i+1),
			URL:    fmt.Sprintf(`/t/melati/audit?from=2026-11-%02d&to="x"`, i+1),
			Values: v, Cells: []string{fmt.Sprint(v[0]), fmt.Sprint(v[1]), fmt.Sprint(v[2])},
			Text: fmt.Sprintf("Sen %d Nov: %d succeeded & <%d> failed", i+1, v[0], v[1]),
		})
	}
	single := components.DayChart{
		ID: "events-chart", Title: "Events", Description: "Busiest day: 1.2k events.",
		Classes: []string{"ev"}, Series: []string{"events"}, DayHeading: "Day", TableLabel: "Numbers",
		Number: func(v int64) string { return fmt.Sprintf("%d ev", v) },
	}
	for i := range 9 {
		v := int64((i + 1) * 137)
		single.Bars = append(single.Bars, components.DayBar{Key: fmt.Sprint(i), Label: fmt.Sprint("d", i), URL: "/d/" + fmt.Sprint(i),
			Values: []int64{v}, Cells: []string{fmt.Sprint(v)}, Text: fmt.Sprint(v, " events")})
	}
	quiet := single
	quiet.ID, quiet.Bars = "quiet-chart", nil
	for i := range 30 {
		quiet.Bars = append(quiet.Bars, components.DayBar{Key: fmt.Sprint(i), Label: fmt.Sprint("d", i), URL: "/q",
			Values: []int64{0}, Cells: []string{"0"}, Text: "nothing"})
	}
	empty := single
	empty.ID, empty.Bars = "empty-chart", nil
	return map[string]components.DayChart{"stacked": stacked, "single": single, "quiet": quiet, "empty": empty}
}

// TestDayChartGolden: each chart renders byte for byte as recorded in
// testdata (recorded from the templ component the hand-written one
// replaced; -update-golden rewrites them).
func TestDayChartGolden(t *testing.T) {
	t.Parallel()
	for name, c := range goldenCharts() {
		var b strings.Builder
		if err := components.DayChartView(c).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", "daychart_"+name+".golden"), b.String())
	}
}

func BenchmarkDayChart(b *testing.B) {
	c := goldenCharts()["stacked"]
	var sb strings.Builder
	for b.Loop() {
		sb.Reset()
		if err := components.DayChartView(c).Render(context.Background(), &sb); err != nil {
			b.Fatal(err)
		}
	}
}
