package components

import (
	"context"
	"time"

	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/reqctx"
)

// Stamp is how every page shows a moment: the date with the reader's month
// names, a 24-hour clock and the zone, "4 Des 2026 13:05:07 WIB" /
// "4 Dec 2026 13:05:07 UTC" (i18n.DateTime). Tenant pages pass the
// tenant's zone, staff pages the staff member's (When). A zero time is "—".
func Stamp(t time.Time, loc *time.Location, lang string) string {
	return NewStamps(lang, loc).When(t)
}

// ZoneAbbr is t's zone as readers know it (i18n.ZoneAbbr).
func ZoneAbbr(t time.Time) string { return i18n.ZoneAbbr(t) }

// When is Stamp for a staff page: in the zone the signed-in staff member
// chose (UTC unless they chose another).
func When(ctx context.Context, t time.Time) string { return StampsFor(ctx).When(t) }

// WhenPtr is When for an optional time ("—" when nil).
func WhenPtr(ctx context.Context, t *time.Time) string { return StampsFor(ctx).WhenPtr(t) }

// Stamps writes many moments for one reader as Stamp does, formatting each
// day's date once: a list's rows mostly share their days, and a date in
// the reader's words is most of a stamp's cost.
type Stamps struct {
	lang string
	loc  *time.Location
	y    int // the last moment's day, whose date follows
	m    time.Month
	d    int
	date string
}

// NewStamps stamps in loc (UTC when nil) and lang.
func NewStamps(lang string, loc *time.Location) *Stamps {
	if loc == nil {
		loc = time.UTC
	}
	return &Stamps{lang: lang, loc: loc}
}

// StampsFor stamps for a staff page, as When does.
func StampsFor(ctx context.Context) *Stamps {
	return NewStamps(i18n.Lang(ctx), reqctx.ViewerFrom(ctx).Location())
}

// Next is Stamp's text of t, t in the reader's zone, and whether its day
// differs from the moment stamped before it (true for the first).
func (s *Stamps) Next(t time.Time) (text string, local time.Time, newDay bool) {
	if t.IsZero() {
		return "—", t, false
	}
	local = t.In(s.loc)
	if y, m, d := local.Date(); s.date == "" || y != s.y || m != s.m || d != s.d {
		s.y, s.m, s.d, s.date, newDay = y, m, d, i18n.Date(s.lang, local), true
	}
	return i18n.DateTimeOn(s.date, local), local, newDay
}

// When is Stamp's text of t.
func (s *Stamps) When(t time.Time) string {
	text, _, _ := s.Next(t)
	return text
}

// WhenPtr is When for an optional time ("—" when nil).
func (s *Stamps) WhenPtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return s.When(*t)
}
