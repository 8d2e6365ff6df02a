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

// describe fills the reader-facing parts of an audit row: the event as a
// sentence in the reader's language (when its action has one), how long
// ago it happened and its day heading, both read in the tenant's zone.
func describe(ctx context.Context, r *components.AuditRow, e audit.Recorded, names map[int64]string, loc *time.Location, now time.Time) {
	lang := i18n.Lang(ctx)
	at := e.OccurredAt.In(loc)
	r.Time = i18n.DateTime(lang, at)
	r.Rel = i18n.Relative(lang, e.OccurredAt, now)
	r.DayKey = at.Format(time.DateOnly)
	r.Day = i18n.DayLabel(lang, e.OccurredAt, now, loc)
	r.Sentence = sentence(ctx, e, r.ActorName, names)
}

// sentence tells e in the reader's language, or nil when its action has no
// sentence in the catalogs.
func sentence(ctx context.Context, e audit.Recorded, actorName string, names map[int64]string) []components.Segment {
	key := "event." + e.Action
	var d map[string]any
	_ = json.Unmarshal(e.Detail, &d)
	str := func(k string) string {
		switch v := d[k].(type) {
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
	role := func(v string) string {
		if v == "" {
			return "—"
		}
		return i18n.T(ctx, "role."+v)
	}
	status := func(v string) string { return i18n.T(ctx, "status."+v) }
	plan := func(v string) string {
		if v == "" {
			return "—"
		}
		return strings.ToUpper(v[:1]) + v[1:]
	}
	quoted := func(v string) string {
		if v == "" {
			return "#" + e.EntityID
		}
		return "“" + v + "”"
	}
	entityUser := func() string {
		if id, err := strconv.ParseInt(e.EntityID, 10, 64); err == nil && names[id] != "" {
			return names[id]
		}
		if v := str("email"); v != "" {
			return v
		}
		return i18n.T(ctx, "audit.user_n", e.EntityID)
	}
	var obj string
	extra := make([]string, 3) // %[3]s, %[4]s, %[5]s
	switch e.Action {
	case "project.create", "project.delete":
		obj = quoted(str("name"))
	case "subscription.change":
		obj = i18n.T(ctx, "obj.plan")
		extra[0], extra[1] = plan(str("from_plan")), plan(str("to_plan"))
		if str("from_plan") == "" {
			key, obj = "event.subscription.start", plan(str("to_plan"))
		}
	case "subscription.status":
		obj = i18n.T(ctx, "obj.subscription")
		extra[0], extra[1] = status(str("from_status")), status(str("to_status"))
	case "membership.set":
		obj = entityUser()
		extra[0], extra[1] = role(str("from_role")), role(str("to_role"))
		if str("from_role") == "" {
			key = "event.membership.add"
		}
	case "member.invite":
		obj, extra[0] = str("email"), role(str("role"))
		if obj == "" {
			obj = entityUser()
		}
	case "member.join":
		extra[0] = role(str("role"))
	case "member.remove":
		obj = entityUser()
	case "invitation.revoke":
		obj = str("email")
	case "auth.signin", "auth.signin_failed":
		extra[0] = str("ip")
	case "report.sent":
		obj, extra[0] = e.EntityID, str("to")
	case "system.daily-export":
		extra[0] = str("tables")
	case "audit_token.create", "audit_token.revoke":
		obj = quoted(str("name"))
	case "audit_token.use":
		obj, extra[0] = quoted(str("name")), str("ip")
	default:
		if strings.HasPrefix(e.Action, "job.") {
			obj = "#" + e.EntityID
			extra[0], extra[1], extra[2] = str("kind"), str("attempt"), str("reason")
		}
	}
	if !i18n.Has(key) {
		return nil
	}
	args := []any{markActor, markObject}
	for _, x := range extra {
		args = append(args, clean(x))
	}
	text := i18n.T(ctx, key, args...)
	actor := clean(actorLabel(ctx, e, actorName))
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
			out = append(out, components.Segment{Kind: "object", Text: clean(obj)})
		}
		text = text[i+1:]
	}
	return out
}

// actorLabel names who did it in the reader's language.
func actorLabel(ctx context.Context, e audit.Recorded, name string) string {
	switch e.ActorKind {
	case audit.ActorSystem:
		return i18n.T(ctx, "actor.system")
	case audit.ActorStaff:
		if name == "" {
			name = i18n.T(ctx, "audit.support_staff")
		}
		return i18n.T(ctx, "actor.support", name)
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
