package components

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/a-h/templ"
)

// DayBar is one day of a 30-day chart, ready to print.
type DayBar struct {
	Key   string // 2006-01-02
	Label string // "Sen 10 Nov"
	URL   string // the timeline filtered to that day
	// Values stack from the bottom: Values[i] is drawn with Classes[i];
	// Cells are the same figures formatted for the reader.
	Values []int64
	Cells  []string
	// Text says the day's figures in words (tooltip, link name, table).
	Text string
}

// DayChart is what a chart shows: bars, their series' CSS classes and
// names, and a sentence describing it (the text alternative).
type DayChart struct {
	ID          string
	Title       string
	Description string
	Classes     []string
	Series      []string // column headings of the table, one per value
	DayHeading  string
	// TableLabel opens the table of figures ("Show the numbers").
	TableLabel string
	Bars       []DayBar
	// Number formats an axis value for the reader (nil = plain digits).
	Number func(int64) string
}

// The chart's x coordinates are percentages of its width and its y
// coordinates pixels, with no viewBox: the SVG stretches to its container
// while its text keeps its CSS size (≥ 12 px on a phone and a laptop alike),
// which a scaled viewBox cannot promise.
const (
	dayW       = 100.0 // per cent
	dayH       = 170.0 // px
	dayBottom  = 22.0
	dayTop     = 20.0
	dayLabelEv = 7 // a day label every week
)

type dayRect struct {
	X, Y, W, H float64
	Class      string
}

type dayGeom struct {
	Slot, PlotH, Baseline float64
	Max                   int64
	// Quarter is the value drawn at half height (a square-root scale).
	Quarter int64
	MidY    float64
	Rects   [][]dayRect
	Labels  []chartLabel
}

// sqrtHeight is v's bar height on a square-root scale topped by max: a
// day with a quarter of the busiest day's figure is half as tall, so a
// spike does not flatten the rest of the month into slivers.
func sqrtHeight(v, top int64, plotH float64) float64 {
	if v <= 0 || top <= 0 {
		return 0
	}
	return math.Sqrt(float64(v)/float64(top)) * plotH
}

func dayGeometry(c DayChart) dayGeom {
	g := dayGeom{PlotH: dayH - dayTop - dayBottom}
	g.Baseline = dayTop + g.PlotH
	for _, b := range c.Bars {
		var sum int64
		for _, v := range b.Values {
			sum += v
		}
		g.Max = max(g.Max, sum)
	}
	g.Quarter, g.MidY = g.Max/4, g.Baseline-sqrtHeight(g.Max/4, g.Max, g.PlotH)
	g.Slot = dayW / float64(max(len(c.Bars), 1))
	for i, b := range c.Bars {
		x := float64(i) * g.Slot
		var rs []dayRect
		// Segments stack on the square-root scale of the running total,
		// so the whole bar's height is the day's total on that scale.
		var sum int64
		for j, v := range b.Values {
			if v <= 0 {
				continue
			}
			lo := sqrtHeight(sum, g.Max, g.PlotH)
			sum += v
			hi := sqrtHeight(sum, g.Max, g.PlotH)
			class := ""
			if j < len(c.Classes) {
				class = c.Classes[j]
			}
			rs = append(rs, dayRect{X: x + g.Slot*0.1, Y: g.Baseline - hi, W: g.Slot * 0.8, H: max(hi-lo, 1), Class: class})
		}
		g.Rects = append(g.Rects, rs)
		if i%dayLabelEv == 0 && i+3 < len(c.Bars) || i == len(c.Bars)-1 {
			g.Labels = append(g.Labels, chartLabel{X: x + g.Slot/2, Y: dayH - 6, Text: b.Label})
		}
	}
	return g
}

// labelAnchor keeps the first and last labels inside the chart.
func labelAnchor(i, n int) string {
	switch {
	case i == 0:
		return "start"
	case i == n-1:
		return "end"
	}
	return "middle"
}

// labelClass marks every other inner label "minor": a phone hides those
// (app.css), so labels at 12 px never overlap on a narrow chart.
func labelClass(i, n int) string {
	if i%2 == 1 && i != n-1 {
		return "minor"
	}
	return ""
}

func labelX(l chartLabel, i, n int) string {
	switch {
	case i == 0:
		return "0%"
	case i == n-1:
		return "100%"
	}
	return pc(l.X)
}

// num formats an axis value with c.Number.
func (c DayChart) num(v int64) string {
	if c.Number == nil {
		return fmt.Sprint(v)
	}
	return c.Number(v)
}

// DayChartView draws c as a server-rendered SVG whose bars are links to
// their day (keyboard-focusable, each named by its figures), described in
// words, with the numbers one click away in a table. Colours come from
// app.css; every figure is also in text, never only in colour.
//
// Written out by hand, byte for byte what its templ version wrote
// (testdata/daychart_*.golden): the owner's home draws two of these, a
// month of bars each with several attributes, and templ's per-attribute
// resolution and class lists made them half of the page's render.
func DayChartView(c DayChart) templ.Component {
	return Written(func(_ context.Context, b []byte) ([]byte, error) { return appendDayChart(b, c), nil })
}

func appendDayChart(b []byte, c DayChart) []byte {
	g := dayGeometry(c)
	b = append(b, `<figure class="daychart" data-testid="`...)
	b = AppendEscaped(b, c.ID)
	b = append(b, `"><figcaption><h2 id="`...)
	b = AppendEscaped(b, c.ID+"-title")
	b = append(b, `">`...)
	b = AppendEscaped(b, c.Title)
	b = append(b, `</h2></figcaption><p id="`...)
	b = AppendEscaped(b, c.ID+"-desc")
	b = append(b, `" class="muted small">`...)
	b = AppendEscaped(b, c.Description)
	b = append(b, `</p><svg class="chart flat" height="`...)
	b = appendF1(b, dayH)
	b = append(b, `" role="group" aria-labelledby="`...)
	b = AppendEscaped(b, c.ID+"-title")
	b = append(b, `" aria-describedby="`...)
	b = AppendEscaped(b, c.ID+"-desc")
	b = append(b, `">`...)
	b = appendGridLine(b, g.Baseline)
	if g.Max > 0 {
		b = appendGridLine(b, dayTop)
		b = appendAxisText(b, dayTop-5, c.num(g.Max))
		if g.Quarter > 0 && g.Quarter < g.Max {
			b = appendGridLine(b, g.MidY)
			b = appendAxisText(b, g.MidY-4, c.num(g.Quarter))
		}
	}
	for i, bar := range c.Bars {
		b = appendDayBar(b, bar, g, i)
	}
	for i, l := range g.Labels {
		n := len(g.Labels)
		b = append(b, `<text class="`...)
		b = AppendEscaped(b, labelClass(i, n))
		b = append(b, `" x="`...)
		b = AppendEscaped(b, labelX(l, i, n))
		b = append(b, `" y="`...)
		b = appendF1(b, l.Y)
		b = append(b, `" text-anchor="`...)
		b = append(b, labelAnchor(i, n)...)
		b = append(b, `" aria-hidden="true">`...)
		b = AppendEscaped(b, l.Text)
		b = append(b, `</text>`...)
	}
	b = append(b, `</svg> `...)
	if len(c.Series) > 1 {
		b = append(b, `<ul class="legend" aria-hidden="true">`...)
		for j, s := range c.Series {
			b = append(b, `<li><svg width="12" height="12" viewBox="0 0 12 12"><rect class="`...)
			b = AppendEscaped(b, c.Classes[j])
			b = append(b, `" width="12" height="12"></rect></svg> `...)
			b = AppendEscaped(b, s)
			b = append(b, `</li>`...)
		}
		b = append(b, `</ul>`...)
	}
	return appendDayTable(b, c)
}

// appendDayBar is one day: a link named by its figures over the day's
// whole column (the hit area), its segments inside.
func appendDayBar(b []byte, bar DayBar, g dayGeom, i int) []byte {
	b = append(b, `<a href="`...)
	b = AppendEscaped(b, bar.URL)
	b = append(b, `" aria-label="`...)
	b = AppendEscaped(b, bar.Text)
	b = append(b, `" data-day="`...)
	b = AppendEscaped(b, bar.Key)
	b = append(b, `"><title>`...)
	b = AppendEscaped(b, bar.Text)
	b = append(b, `</title>`...)
	b = appendRect(b, "hit", float64(i)*g.Slot, dayTop, g.Slot, g.PlotH)
	b = append(b, ' ')
	for _, r := range g.Rects[i] {
		b = appendRect(b, r.Class, r.X, r.Y, r.W, r.H)
	}
	return append(b, `</a> `...)
}

func appendDayTable(b []byte, c DayChart) []byte {
	b = append(b, `<details class="chart-table"><summary>`...)
	b = AppendEscaped(b, c.TableLabel)
	b = append(b, `</summary><table class="stack" data-testid="`...)
	b = AppendEscaped(b, c.ID+"-table")
	b = append(b, `"><thead><tr><th scope="col">`...)
	b = AppendEscaped(b, c.DayHeading)
	b = append(b, `</th>`...)
	for _, s := range c.Series {
		b = append(b, `<th scope="col">`...)
		b = AppendEscaped(b, s)
		b = append(b, `</th>`...)
	}
	b = append(b, `</tr></thead> <tbody>`...)
	for _, bar := range c.Bars {
		b = append(b, `<tr><th scope="row"><a href="`...)
		b = AppendEscaped(b, bar.URL)
		b = append(b, `">`...)
		b = AppendEscaped(b, bar.Label)
		b = append(b, `</a></th>`...)
		for j, v := range bar.Cells {
			b = append(b, `<td data-label="`...)
			b = AppendEscaped(b, c.Series[j])
			b = append(b, `">`...)
			b = AppendEscaped(b, v)
			b = append(b, `</td>`...)
		}
		b = append(b, `</tr>`...)
	}
	return append(b, `</tbody></table></details></figure>`...)
}

func appendGridLine(b []byte, y float64) []byte {
	b = append(b, `<line class="grid" x1="0" x2="100%" y1="`...)
	b = appendF1(b, y)
	b = append(b, `" y2="`...)
	b = appendF1(b, y)
	return append(b, `"></line> `...)
}

func appendAxisText(b []byte, y float64, text string) []byte {
	b = append(b, `<text class="axis" x="0" y="`...)
	b = appendF1(b, y)
	b = append(b, `" aria-hidden="true">`...)
	b = AppendEscaped(b, text)
	return append(b, `</text> `...)
}

func appendRect(b []byte, class string, x, y, w, h float64) []byte {
	b = append(b, `<rect class="`...)
	b = AppendEscaped(b, class)
	b = append(b, `" x="`...)
	b = appendPc(b, x)
	b = append(b, `" y="`...)
	b = appendF1(b, y)
	b = append(b, `" width="`...)
	b = appendPc(b, w)
	b = append(b, `" height="`...)
	b = appendF1(b, h)
	return append(b, `"></rect>`...)
}

// pc is an x coordinate, a percentage of the chart's width.
func pc(v float64) string { return string(appendPc(nil, v)) }

// appendF1 appends a y coordinate as f1 (jobchart.templ) writes it, and
// appendPc an x coordinate as pc, without the formatting machinery.
func appendF1(b []byte, v float64) []byte { return strconv.AppendFloat(b, v, 'f', 1, 64) }

func appendPc(b []byte, v float64) []byte { return append(strconv.AppendFloat(b, v, 'f', 2, 64), '%') }
