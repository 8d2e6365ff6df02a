package web

import (
	"context"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/views/components"
)

// TestRowTimesReadAsEachMomentAlone: a page's rows, newest first across a
// day boundary in the tenant's zone (not UTC's), across ages in every unit
// and from one row to the next on the same day of another month and of
// another year, get the same times, headings and ages as each moment formatted on
// its own, in both languages.
func TestRowTimesReadAsEachMomentAlone(t *testing.T) {
	jakarta, err := time.LoadLocation("Asia/Jakarta")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 5, 18, 30, 0, 0, time.UTC) // 01:30 WIB on the 6th
	var at []time.Time
	for _, back := range []time.Duration{0, 20 * time.Second, 59 * time.Second, time.Minute, 61 * time.Second,
		119 * time.Second, 2 * time.Minute, 29 * time.Minute, 31 * time.Minute, 89 * time.Minute, 2 * time.Hour,
		23*time.Hour + 59*time.Minute, 24 * time.Hour, 47 * time.Hour, 49 * time.Hour,
		49*time.Hour + 30*24*time.Hour, 49*time.Hour + 395*24*time.Hour, 400 * 24 * time.Hour} {
		at = append(at, now.Add(-back))
	}
	for _, lang := range []string{i18n.EN, i18n.ID} {
		ctx := i18n.WithLang(context.Background(), lang)
		times := newRowTimes(ctx, jakarta, now)
		days := map[string]bool{}
		for _, a := range at {
			var r components.AuditRow
			times.describe(&r, audit.Recorded{OccurredAt: a})
			local := a.In(jakarta)
			want := components.AuditRow{Time: i18n.DateTime(lang, local), Clock: local.Format("15:04"),
				Rel: i18n.Relative(lang, a, now), DayKey: local.Format(time.DateOnly), Day: i18n.DayLabel(lang, a, now, jakarta)}
			if r.Time != want.Time || r.Clock != want.Clock || r.Rel != want.Rel || r.DayKey != want.DayKey || r.Day != want.Day {
				t.Fatalf("%s, %s: got %q %q %q %q %q, want %q %q %q %q %q", lang, a, r.Time, r.Clock, r.Rel, r.DayKey, r.Day,
					want.Time, want.Clock, want.Rel, want.DayKey, want.Day)
			}
			days[r.Day] = true
		}
		if len(days) < 4 {
			t.Fatalf("%s: the moments fall on %d days; the case needs rows of several days", lang, len(days))
		}
	}
}
