// Package i18n translates Jejak's tenant-facing text into Bahasa Indonesia
// and English. Messages live in one catalog per language (catalog_en.go,
// catalog_id.go), keyed by short dotted ids; golang.org/x/text/message
// formats them, numbers included, per language. The request's language
// travels in the context (WithLang / Lang), so views translate with
// T(ctx, key, args...) without knowing where the choice came from.
//
// This is a leaf package: views may import it.
package i18n

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"golang.org/x/text/message/catalog"
)

// Languages.
const (
	EN = "en" // English
	ID = "id" // Bahasa Indonesia
)

// Default is the language when neither the user nor the browser chose one.
const Default = EN

// Supported lists the languages in the order a chooser shows them.
var Supported = []string{ID, EN}

var (
	tags    = map[string]language.Tag{EN: language.English, ID: language.Indonesian}
	cat     = catalog.NewBuilder(catalog.Fallback(language.English))
	matcher = language.NewMatcher([]language.Tag{language.English, language.Indonesian})
	// printers are built once: a Printer is safe for concurrent use.
	printers = map[string]*message.Printer{}
	// plain holds every catalog key translated without arguments, per
	// language: most calls (labels, headings) pass none, and formatting
	// through a Printer allocates on each of them.
	plain = map[string]map[string]string{}
	// textual holds, per language, the messages whose every verb is a
	// string's (%s, %[n]s): given only strings, fmt formats them exactly
	// as the Printer does (no number to group), at a fraction of the cost;
	// the trail formats one per row.
	textual = map[string]map[string]textMessage{}
	// textVerbs matches a message's verbs when all of them are a string's.
	textVerbs = regexp.MustCompile(`^(?:[^%]|%%|%(?:\[[1-9]\])?s)*$`)
	textVerb  = regexp.MustCompile(`%%|%(\[([1-9])\])?s`)
)

// textMessage is a message of string verbs only, with how many arguments
// it reads. fmt reports arguments a message leaves unread (unless it
// numbers them) or lacks; the Printer does not, so only a call that passes
// what the message reads takes fmt.
type textMessage struct {
	format   string
	reads    int  // the highest argument a verb reads
	numbered bool // some verb names its argument: fmt reports no extras
}

func newTextMessage(msg string) textMessage {
	m := textMessage{format: msg}
	next := 0
	for _, v := range textVerb.FindAllStringSubmatch(msg, -1) {
		switch {
		case v[0] == "%%":
			continue
		case v[2] != "":
			next = int(v[2][0] - '0')
			m.numbered = true
		default:
			next++
		}
		m.reads = max(m.reads, next)
	}
	return m
}

// fits reports whether fmt formats args with m as the Printer would.
func (m textMessage) fits(args []any) bool {
	if len(args) < m.reads || (!m.numbered && len(args) != m.reads) {
		return false
	}
	for _, a := range args {
		if _, ok := a.(string); !ok {
			return false
		}
	}
	return true
}

func init() {
	for lang, msgs := range Catalogs() {
		for key, msg := range msgs {
			if err := cat.SetString(tags[lang], key, msg); err != nil {
				panic(fmt.Sprintf("i18n: catalog %s key %q: %v", lang, key, err))
			}
		}
	}
	for lang, tag := range tags {
		printers[lang] = message.NewPrinter(tag, message.Catalog(cat))
		plain[lang] = make(map[string]string, len(en))
		for key := range en {
			plain[lang][key] = printers[lang].Sprintf(key)
		}
		textual[lang] = map[string]textMessage{}
		for key, msg := range Catalogs()[lang] {
			if strings.Contains(msg, "%") && textVerbs.MatchString(msg) {
				textual[lang][key] = newTextMessage(msg)
			}
		}
	}
}

// Catalogs returns every language's messages by key (for tests and tools).
func Catalogs() map[string]map[string]string {
	return map[string]map[string]string{EN: en, ID: id}
}

// Valid reports whether lang is a supported language code.
func Valid(lang string) bool { _, ok := tags[lang]; return ok }

// FromAcceptLanguage picks the supported language a browser prefers, or
// Default when the header names none of them.
func FromAcceptLanguage(header string) string {
	if strings.TrimSpace(header) == "" {
		return Default
	}
	prefs, _, err := language.ParseAcceptLanguage(header)
	if err != nil || len(prefs) == 0 {
		return Default
	}
	_, idx, conf := matcher.Match(prefs...)
	if conf == language.No {
		return Default
	}
	return []string{EN, ID}[idx]
}

type ctxKey struct{}

// WithLang returns ctx carrying the reader's language.
func WithLang(ctx context.Context, lang string) context.Context {
	if !Valid(lang) {
		lang = Default
	}
	return context.WithValue(ctx, ctxKey{}, lang)
}

// Lang returns the reader's language (Default when none was set).
func Lang(ctx context.Context) string {
	if l, ok := ctx.Value(ctxKey{}).(string); ok {
		return l
	}
	return Default
}

// T translates key into the context's language, formatting args the
// language's way (numbers grouped as 1.234 in Indonesian, 1,234 in
// English). A key missing from the catalogs is printed as is, so a
// domain's English validation message still reads when untranslated.
func T(ctx context.Context, key string, args ...any) string {
	return In(Lang(ctx), key, args...)
}

// In is T for an explicit language (mail and other work outside a request).
func In(lang, key string, args ...any) string {
	p, ok := printers[lang]
	if !ok {
		lang, p = Default, printers[Default]
	}
	if len(args) == 0 {
		if s, ok := plain[lang][key]; ok {
			return s
		}
		// Untranslated text (a domain's message) is shown as is, never
		// read as a format: a stray % must not print as %!v(MISSING).
		return key
	}
	if m, ok := textual[lang][key]; ok && m.fits(args) {
		return fmt.Sprintf(m.format, args...)
	}
	return p.Sprintf(key, args...)
}

// Enum translates a fixed value shown to people (a job state, an alert
// state, a delivery outcome) by the key group+"."+value. The value itself
// stays what URLs and forms use; one without a translation is shown as is.
func Enum(ctx context.Context, group, value string) string {
	if key := group + "." + value; Has(key) {
		return T(ctx, key)
	}
	return value
}

// Has reports whether key is in the catalogs.
func Has(key string) bool { _, ok := en[key]; return ok }

// Number formats n the language's way.
func Number(ctx context.Context, n int64) string {
	if n > -1000 && n < 1000 {
		// No digit to group: the Printer would write what strconv does,
		// at many times the cost (the owner's home prints over a hundred).
		return strconv.FormatInt(n, 10)
	}
	return In(Lang(ctx), "%d", n)
}

// Decimal formats v the language's way (1.234,5 / 1,234.5) with at most
// four significant digits: a measured value, not an exact figure.
func Decimal(ctx context.Context, v float64) string { return In(Lang(ctx), "%.4g", v) }

// Weekday is the short name of a weekday ("Mon", "Sen").
func Weekday(lang string, d time.Weekday) string { return In(lang, weekdayKeys[d%7]) }

// Month is the short name of a month ("Nov", "Nov"; "Aug", "Agu").
func Month(lang string, m time.Month) string {
	if m < time.January || m > time.December {
		return In(lang, "month."+strconv.Itoa(int(m)))
	}
	return In(lang, monthKeys[m-1])
}

// The catalog keys of weekdays and months, built once rather than per
// date printed.
var (
	weekdayKeys = [7]string{"weekday.0", "weekday.1", "weekday.2", "weekday.3", "weekday.4", "weekday.5", "weekday.6"}
	monthKeys   = [12]string{"month.1", "month.2", "month.3", "month.4", "month.5", "month.6", "month.7", "month.8",
		"month.9", "month.10", "month.11", "month.12"}
)

// ShortDate formats t as "Mon 10 Nov" / "Sen 10 Nov" (t in the zone wanted).
func ShortDate(lang string, t time.Time) string {
	return Weekday(lang, t.Weekday()) + " " + strconv.Itoa(t.Day()) + " " + Month(lang, t.Month())
}

// Date formats t as "10 Nov 2026" / "10 Nov 2026" with the language's month.
func Date(lang string, t time.Time) string {
	return strconv.Itoa(t.Day()) + " " + Month(lang, t.Month()) + " " + strconv.Itoa(t.Year())
}

// DateTime is the one way a moment is printed: "10 Nov 2026 14:05:00 WIB"
// with the language's month names, a 24-hour clock and the zone (t in the
// zone wanted). Pages reach it through views/components.Stamp.
func DateTime(lang string, t time.Time) string { return DateTimeOn(Date(lang, t), t) }

// DateTimeOn is DateTime for a t whose Date is already formatted: a page of
// moments, most of them of one day, formats the date once.
func DateTimeOn(date string, t time.Time) string {
	return date + " " + t.Format("15:04:05") + " " + ZoneAbbr(t)
}

// ZoneAbbr is t's zone as readers know it ("WIB", "UTC", "CET"), or its
// offset from UTC ("UTC+05:45") when the tz database has no abbreviation.
func ZoneAbbr(t time.Time) string {
	abbr, off := t.Zone()
	if abbr != "" && abbr[0] != '+' && abbr[0] != '-' {
		return abbr
	}
	sign := '+'
	if off < 0 {
		sign, off = '-', -off
	}
	return fmt.Sprintf("UTC%c%02d:%02d", sign, off/3600, off%3600/60)
}

// DayLabel names the calendar day of t relative to now, both read in loc:
// "Today", "Yesterday", else "Mon 10 Nov" (with the year when it differs).
func DayLabel(lang string, t, now time.Time, loc *time.Location) string {
	t, now = t.In(loc), now.In(loc)
	ty, tm, td := t.Date()
	ny, nm, nd := now.Date()
	today := time.Date(ny, nm, nd, 0, 0, 0, 0, loc)
	day := time.Date(ty, tm, td, 0, 0, 0, 0, loc)
	switch {
	case day.Equal(today):
		return In(lang, "day.today")
	case day.Equal(today.AddDate(0, 0, -1)):
		return In(lang, "day.yesterday")
	case ty != ny:
		return ShortDate(lang, t) + " " + fmt.Sprint(ty)
	default:
		return ShortDate(lang, t)
	}
}

// Relative says how long ago t was: "just now", "5 min ago", "3 h ago",
// "2 days ago" (and the language's equivalents).
func Relative(lang string, t, now time.Time) string { return AgoOf(t, now).In(lang) }

// Ago is how long ago something was, in the unit Relative says it in: two
// moments with equal Agos read the same, so a page of them can say each
// distinct one once.
type Ago struct {
	key string
	n   int64
}

// AgoOf is how long before now t was.
func AgoOf(t, now time.Time) Ago {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return Ago{key: "rel.now"}
	case d < time.Hour:
		return Ago{"rel.minutes", int64(d / time.Minute)}
	case d < 24*time.Hour:
		return Ago{"rel.hours", int64(d / time.Hour)}
	default:
		return Ago{"rel.days", int64(d / (24 * time.Hour))}
	}
}

// In says a in lang.
func (a Ago) In(lang string) string {
	switch a.key {
	case "rel.now":
		return In(lang, a.key)
	case "rel.days":
		return PluralIn(lang, a.key, a.n, a.n)
	default:
		return In(lang, a.key, int(a.n))
	}
}

// Duration says how long d is in words, largest units first and zero
// parts left out: "24 hours", "1 hour 30 minutes" / "24 jam",
// "1 jam 30 menit". Under a second it is "0 seconds".
func Duration(ctx context.Context, d time.Duration) string { return DurationIn(Lang(ctx), d) }

// DurationIn is Duration for an explicit language.
func DurationIn(lang string, d time.Duration) string {
	if d < 0 {
		d = -d
	}
	units := []struct {
		size      time.Duration
		one, many string
	}{
		{24 * time.Hour, "dur.day", "dur.days"},
		{time.Hour, "dur.hour", "dur.hours"},
		{time.Minute, "dur.minute", "dur.minutes"},
		{time.Second, "dur.second", "dur.seconds"},
	}
	var parts []string
	for _, u := range units {
		n := int64(d / u.size)
		d -= time.Duration(n) * u.size
		// A whole number of days under a week reads better in hours
		// ("48 hours" rather than "2 days" is what overlaps are set in).
		if u.size == 24*time.Hour && n < 7 {
			d += time.Duration(n) * u.size
			continue
		}
		switch {
		case n == 1:
			parts = append(parts, In(lang, u.one))
		case n > 1:
			parts = append(parts, In(lang, u.many, n))
		}
	}
	if len(parts) == 0 {
		return In(lang, "dur.seconds", 0)
	}
	return strings.Join(parts, " ")
}
