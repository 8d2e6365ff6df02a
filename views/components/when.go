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
	if t.IsZero() {
		return "—"
	}
	if loc == nil {
		loc = time.UTC
	}
	return i18n.DateTime(lang, t.In(loc))
}

// ZoneAbbr is t's zone as readers know it (i18n.ZoneAbbr).
func ZoneAbbr(t time.Time) string { return i18n.ZoneAbbr(t) }

// When is Stamp for a staff page: in the zone the signed-in staff member
// chose (UTC unless they chose another).
func When(ctx context.Context, t time.Time) string {
	return Stamp(t, reqctx.ViewerFrom(ctx).Location(), i18n.Lang(ctx))
}

// WhenPtr is When for an optional time ("—" when nil).
func WhenPtr(ctx context.Context, t *time.Time) string {
	if t == nil {
		return "—"
	}
	return When(ctx, *t)
}
