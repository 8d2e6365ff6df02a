package web

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/views/components"
)

// Markers stand for the actor and the entity while a sentence is
// formatted, so the view can render them as a name and a link. Catalog text
// never holds them, and they are stripped from every value taken from an
// event (a decoded JSON string may contain any character).
const (
	markActor  = "\x01"
	markObject = "\x02"
)

// rowTimes fills the reader-facing times of a page of audit rows: each
// row's moment, clock time, how long ago it happened and its day heading,
// all read in the tenant's zone. A page's rows are newest first and mostly
// share their day and their age ("3 h ago"), so it formats each day's words
// and each distinct age once, not once per row.
type rowTimes struct {
	lang    string
	now     time.Time
	stamps  *components.Stamps
	dayKey  string // the last row's day and its heading
	heading string
	ago     i18n.Ago // the zero Ago is no moment's: the first row formats its own
	rel     string
}

func newRowTimes(ctx context.Context, loc *time.Location, now time.Time) *rowTimes {
	lang := i18n.Lang(ctx)
	return &rowTimes{lang: lang, now: now, stamps: components.NewStamps(lang, loc)}
}

func (rt *rowTimes) describe(r *components.AuditRow, e audit.Recorded) {
	text, at, newDay := rt.stamps.Next(e.OccurredAt)
	if newDay {
		rt.dayKey = at.Format(time.DateOnly)
		rt.heading = i18n.DayLabel(rt.lang, e.OccurredAt, rt.now, at.Location())
	}
	r.Time, r.Clock = text, at.Format("15:04")
	r.DayKey, r.Day = rt.dayKey, rt.heading
	if a := i18n.AgoOf(e.OccurredAt, rt.now); a != rt.ago {
		rt.ago, rt.rel = a, a.In(rt.lang)
	}
	r.Rel = rt.rel
}

// sentence tells e in the reader's language, or nil when its action has no
// sentence in the catalogs.
func sentence(ctx context.Context, e audit.Recorded, actorName string) []components.Segment {
	ev := eventWords{ctx: ctx, e: e}
	_ = json.Unmarshal(e.Detail, &ev.detail)
	key, obj, extra := ev.parts()
	if !i18n.Has(key) {
		return nil
	}
	args := []any{markActor, markObject}
	for _, x := range extra {
		args = append(args, clean(x))
	}
	text := i18n.T(ctx, key, args...)
	return segments(text, clean(actorLabel(ctx, e, actorName)), clean(obj))
}

// staffName names a staff member once, with their role: "Sinta (support)".
// A name that already ends in its role, as "Sinta (Support)" does, keeps
// it rather than saying it twice.
func staffName(ctx context.Context, name, role string) string {
	if name == "" {
		return i18n.T(ctx, "audit.support_staff")
	}
	if role == "" || strings.HasSuffix(strings.ToLower(name), "("+role+")") {
		return name
	}
	return i18n.T(ctx, "actor.staff", name, i18n.Enum(ctx, "staff_role", role))
}

// eventWords reads an event's detail as the words its sentence is made of.
type eventWords struct {
	ctx    context.Context
	e      audit.Recorded
	detail map[string]any
}

// parts picks the catalog key for the event, the words standing for its
// object, and the extra arguments (%[3]s, %[4]s, %[5]s) its sentence takes.
// Every action audit.Actions lists has a case here or a sentence whose
// words are the default ones (TestEveryActionHasASentence).
func (w eventWords) parts() (key, obj string, extra []string) {
	key = "event." + w.e.Action
	extra = make([]string, 3)
	switch w.e.Action {
	case "project.create", "project.delete", "audit_token.create", "audit_token.revoke":
		obj = w.quoted(w.str("name"))
	case "subscription.change":
		obj = i18n.T(w.ctx, "obj.plan")
		extra[0], extra[1] = plan(w.str("from_plan")), plan(w.str("to_plan"))
		if w.str("from_plan") == "" {
			key, obj = "event.subscription.start", plan(w.str("to_plan"))
		}
	case "subscription.status", "subscription.status_changed":
		obj = i18n.T(w.ctx, "obj.subscription")
		extra[0], extra[1] = w.status(w.str("from_status")), w.status(w.str("to_status"))
	case "membership.set":
		obj = w.entityUser()
		extra[0], extra[1] = w.role(w.str("from_role")), w.role(w.str("to_role"))
		if w.str("from_role") == "" {
			key = "event.membership.add"
		}
	case "member.invite":
		obj, extra[0] = w.str("email"), w.role(w.str("role"))
		if obj == "" {
			obj = w.entityUser()
		}
	case "member.join":
		extra[0] = w.role(w.str("role"))
	case "member.remove":
		obj = w.entityUser()
	case "member.access_disabled", "member.access_restored":
		obj, extra[0] = w.entityUser(), w.str("reason")
	case "invitation.revoke":
		obj = w.str("email")
	case "auth.signin", "auth.signin_failed":
		extra[0] = w.str("ip")
	case "report.sent":
		obj, extra[0] = w.report()
	case "system.daily-export":
		extra[0] = w.str("tables")
	case "audit_token.use":
		obj, extra[0] = w.quoted(w.str("name")), w.str("ip")
	default:
		return w.moreParts(key)
	}
	return key, obj, extra
}

// moreParts is parts for billing, approvals, webhooks and jobs.
func (w eventWords) moreParts(key string) (string, string, []string) {
	obj, extra := "#"+w.e.EntityID, make([]string, 3)
	switch a := w.e.Action; {
	case a == "invoice.created":
		extra[0], extra[1] = plan(w.str("plan")), w.amount("amount_idr")
	case a == "payment.charged", a == "payment.refunded":
		extra[0], extra[1] = w.str("charge"), w.amount("amount_idr")
	case a == "payment.declined":
		extra[0] = w.str("error")
	case a == "payment.reconciled_paid":
		extra[0] = w.str("reason")
	case a == "payment.duplicate_detected":
		extra[0] = w.str("duplicate")
	case a == "settings.members_see_billing":
		if on, _ := w.detail["members_see_billing"].(bool); !on {
			key = "event.settings.members_hide_billing"
		}
	case a == "approval.requested", a == "approval.approved", a == "approval.rejected":
		extra[0], extra[1] = w.str("action"), w.str("reason")
	case strings.HasPrefix(a, "webhook.endpoint."):
		obj, extra[0] = w.str("url"), w.str("reason")
	case a == "webhook.delivery.resend":
		extra[0] = w.str("event_type")
	case a == "outbox.retry":
		extra[0], extra[1] = w.count("messages", "audit.n_messages"), w.str("reason")
	case a == "points.awarded":
		obj = w.e.EntityID
		extra[0], extra[1] = w.count("points", "audit.n_points"), w.str("reason")
	case strings.HasPrefix(a, "job."):
		extra[0], extra[1], extra[2] = w.str("kind"), w.str("attempt"), w.str("reason")
	}
	return key, obj, extra
}

// report names a weekly report by its week and says whom it went to: the
// address in the detail, else how many recipients, else the owners and
// admins it is always sent to.
func (w eventWords) report() (week, to string) {
	week = w.e.EntityID
	if t, err := time.Parse(time.RFC3339, w.str("week_start")); err == nil {
		week = i18n.T(w.ctx, "audit.week_of", i18n.Date(i18n.Lang(w.ctx), t))
	}
	switch {
	case w.str("to") != "":
		to = w.str("to")
	case w.detail["recipients"] != nil:
		to = w.count("recipients", "audit.n_recipients")
	default:
		to = i18n.T(w.ctx, "audit.owners_admins")
	}
	return week, to
}

// count is detail field k, a number, as "3 points" / "1 point" in the
// reader's language (catalog key, with its singular form).
func (w eventWords) count(k, key string) string {
	n, _ := w.detail[k].(float64)
	return i18n.Count(w.ctx, key, int64(n))
}

// amount is detail field k, rupiah, grouped the reader's way.
func (w eventWords) amount(k string) string {
	n, _ := w.detail[k].(float64)
	return i18n.Number(w.ctx, int64(n))
}

// str is detail field k as text: numbers as written, lists joined by commas.
func (w eventWords) str(k string) string {
	switch v := w.detail[k].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case []any:
		parts := make([]string, 0, len(v))
		for _, p := range v {
			parts = append(parts, fmt.Sprint(p))
		}
		return strings.Join(parts, ", ")
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// role names a membership role in the reader's language ("—" for none).
func (w eventWords) role(v string) string {
	if v == "" {
		return "—"
	}
	return i18n.T(w.ctx, "role."+v)
}

// status names a subscription status in the reader's language.
func (w eventWords) status(v string) string { return i18n.T(w.ctx, "status."+v) }

// quoted is a name in quotation marks, or the entity's id when it has none.
func (w eventWords) quoted(v string) string {
	if v == "" {
		return "#" + w.e.EntityID
	}
	return "“" + v + "”"
}

// entityUser names the user the event is about: the name read with the
// event, else the email in the detail, else "user N".
func (w eventWords) entityUser() string {
	if w.e.EntityUserName != "" {
		return w.e.EntityUserName
	}
	if v := w.str("email"); v != "" {
		return v
	}
	return i18n.T(w.ctx, "audit.user_n", w.e.EntityID)
}

// plan is a plan name capitalised ("—" for none).
func plan(v string) string {
	if v == "" {
		return "—"
	}
	return strings.ToUpper(v[:1]) + v[1:]
}

// segments splits a formatted sentence at its markers into text, actor and
// object pieces.
func segments(text, actor, obj string) []components.Segment {
	var out []components.Segment
	for text != "" {
		i := strings.IndexAny(text, markActor+markObject)
		if i < 0 {
			out = append(out, components.Segment{Kind: "text", Text: text})
			break
		}
		if i > 0 {
			out = append(out, components.Segment{Kind: "text", Text: text[:i]})
		}
		if text[i:i+1] == markActor {
			out = append(out, components.Segment{Kind: "actor", Text: actor})
		} else {
			out = append(out, components.Segment{Kind: "object", Text: obj})
		}
		text = text[i+1:]
	}
	return out
}

// actorLabel names who did it in the reader's language (name is already
// the staff member's name with their role, see staffName).
func actorLabel(ctx context.Context, e audit.Recorded, name string) string {
	switch e.ActorKind {
	case audit.ActorSystem:
		return i18n.T(ctx, "actor.system")
	case audit.ActorStaff:
		if name == "" {
			return i18n.T(ctx, "audit.support_staff")
		}
		return name
	}
	if name != "" {
		return name
	}
	if e.ActorID != nil {
		return i18n.T(ctx, "audit.user_n", strconv.FormatInt(*e.ActorID, 10))
	}
	return "?"
}

// markers drops the marker characters. Built once: a Replacer builds its
// tables on first use, and building one per call (several per row) was a
// quarter of the timeline handler's CPU and most of its garbage.
var markers = strings.NewReplacer(markActor, "", markObject, "")

// clean drops the marker characters from text taken from an event.
func clean(s string) string {
	if !strings.ContainsAny(s, markActor+markObject) {
		return s
	}
	return markers.Replace(s)
}

// dayKey is a day as carried in an "older" link.
var dayKey = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// now is the server's reading of the injected clock, for presentation only
// (relative times and day headings): the production clock defers to the
// database, so the web server's own clock stands in then.
func (s *Server) now() time.Time {
	if n := s.Clock.Now(); n != nil {
		return *n
	}
	return time.Now()
}
