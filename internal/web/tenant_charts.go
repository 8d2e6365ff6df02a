package web

import (
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/activity"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/views/components"
)

// chartDays is how many days the owner's home pictures.
const chartDays = 30

// homeCharts is the owner home's two 30-day charts, rendered once per
// distinct tenant, language, zone and days: every member reading the home
// between two changes of its figures gets the same bytes, and building and
// drawing sixty bars was a third of the home's CPU per request. Slot and
// inputs hold every input of buildHomeCharts.
func homeCharts(c echo.Context, days []activity.Day) []templ.Component {
	t := currentTenant(c)
	slot := "home\x00" + i18n.Lang(c.Request().Context()) + "\x00" + t.Location().String() + "\x00" +
		strconv.FormatInt(t.ID, 10) + "\x00" + t.Slug
	inputs := make([]byte, 0, len(days)*40)
	for _, d := range days {
		inputs = d.Date.AppendFormat(inputs, time.DateOnly)
		for _, v := range [...]int64{d.Events, d.Succeeded, d.Failed, d.Dead} {
			inputs = strconv.AppendInt(append(inputs, ' '), v, 10)
		}
		inputs = append(inputs, 0)
	}
	in := string(inputs)
	charts := sync.OnceValue(func() []components.DayChart { return buildHomeCharts(c, days) })
	return []templ.Component{
		components.Fragments.Component(slot+"\x00events", in, func() templ.Component { return components.DayChartView(charts()[0]) }),
		components.Fragments.Component(slot+"\x00jobs", in, func() templ.Component { return components.DayChartView(charts()[1]) }),
	}
}

// buildHomeCharts builds the owner home's two 30-day charts: audit events
// per day and job outcomes per day, each bar a link to the timeline
// filtered to its day.
func buildHomeCharts(c echo.Context, days []activity.Day) []components.DayChart {
	ctx := c.Request().Context()
	t := currentTenant(c)
	loc := t.Location()
	lang := i18n.Lang(ctx)
	n := func(v int64) string { return i18n.Number(ctx, v) }
	events := components.DayChart{ID: "activity-chart", Title: i18n.T(ctx, "home.activity"), Number: n,
		Classes: []string{"events"}, Series: []string{i18n.T(ctx, "home.table_events")},
		DayHeading: i18n.T(ctx, "home.table_day"), TableLabel: i18n.T(ctx, "home.show_table")}
	jobs := components.DayChart{ID: "jobs-chart", Title: i18n.T(ctx, "home.jobs_chart"), Number: n,
		Classes:    []string{"ok", "fail", "deadbar"},
		Series:     []string{i18n.T(ctx, "home.table_succeeded"), i18n.T(ctx, "home.table_failed"), i18n.T(ctx, "home.table_dead")},
		DayHeading: i18n.T(ctx, "home.table_day"), TableLabel: i18n.T(ctx, "home.show_table")}
	var total, ok, failed, dead int64
	for _, d := range days {
		key := d.Date.Format(time.DateOnly)
		label := i18n.ShortDate(lang, d.Date)
		u := dayURL(t.Slug, key)
		total += d.Events
		events.Bars = append(events.Bars, components.DayBar{Key: key, Label: label, URL: u,
			Values: []int64{d.Events}, Cells: []string{n(d.Events)},
			Text: i18n.Plural(ctx, "home.day_events", d.Events, label, n(d.Events))})
		// Failed includes the attempts that became dead letters; the bars
		// stack them apart so nothing is counted twice.
		retried := d.Failed - d.Dead
		ok, failed, dead = ok+d.Succeeded, failed+retried, dead+d.Dead
		jobs.Bars = append(jobs.Bars, components.DayBar{Key: key, Label: label, URL: u,
			Values: []int64{d.Succeeded, retried, d.Dead}, Cells: []string{n(d.Succeeded), n(retried), n(d.Dead)},
			Text: i18n.T(ctx, "home.day_jobs", label, n(d.Succeeded), n(retried), n(d.Dead))})
	}
	scale := " " + i18n.T(ctx, "chart.sqrt_scale")
	events.Description = i18n.Plural(ctx, "home.activity_desc", total, zoneLabel(loc), n(total)) + scale
	jobs.Description = i18n.T(ctx, "home.jobs_desc", n(ok), n(failed), n(dead)) + scale
	return []components.DayChart{events, jobs}
}

// dayURL is the timeline filtered to one day (both ends inclusive).
func dayURL(slug, day string) string {
	return "/t/" + slug + "/audit?" + url.Values{"from": {day}, "to": {day}}.Encode()
}
