package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/keyset"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/user"
	"github.com/jejakhq/jejak/views/components"
	viewtenant "github.com/jejakhq/jejak/views/tenant"
)

// auditPageSize is how many events one timeline page shows.
const auditPageSize = 50

// auditPollLimit bounds one poll's answer; a burst larger than this
// arrives over the next polls, oldest first, without gaps.
const auditPollLimit = 100

// shownTime is how tenant pages print times: "2 Agu 2026 14:05:00 WIB",
// the month named in the reader's language (t in the zone wanted).
func shownTime(ctx context.Context, t time.Time) string {
	return components.Stamp(t, t.Location(), i18n.Lang(ctx))
}

// auditFilter is a parsed timeline filter: what the form showed, what the
// query asks, and the canonical query string carried by links.
type auditFilter struct {
	form  viewtenant.AuditFilterForm
	f     audit.Filter
	query string
}

// parseAuditFilter reads the filter query parameters. Invalid values come
// back as form errors (the caller answers 422 with them next to the
// fields); nothing is read from the audit trail then.
func (s *Server) parseAuditFilter(c echo.Context, loc *time.Location) (auditFilter, error) {
	q := c.QueryParams()
	get := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	af := auditFilter{form: viewtenant.AuditFilterForm{
		Action: get("action"), Entity: get("entity"), EntityID: q.Get("entity_id"),
		Actor: get("actor"), From: get("from"), To: get("to"), Trace: get("trace"), Job: get("job"),
		Quick: get("quick"), Q: get("q"), Errors: map[string]string{},
	}}
	fm := &af.form
	canon := url.Values{}
	parseQuickSearch(fm, &af.f, canon)

	if fm.Action != "" {
		if !audit.ValidAction(fm.Action) {
			fm.Errors["action"] = "An action is lower-case, like project.create."
		} else {
			af.f.Action = fm.Action
			canon.Set("action", fm.Action)
		}
	}
	if fm.Entity != "" {
		if len(fm.Entity) > 100 || !printable(fm.Entity) {
			fm.Errors["entity"] = "An entity is a short name, like project."
		} else {
			af.f.Entity = fm.Entity
			canon.Set("entity", fm.Entity)
		}
	}
	if fm.EntityID != "" {
		if fm.Entity == "" || len(fm.EntityID) > 200 || !printable(fm.EntityID) {
			fm.Errors["entity"] = "An entity id needs an entity and at most 200 characters."
		} else {
			af.f.EntityID = fm.EntityID
			canon.Set("entity_id", fm.EntityID)
		}
	}
	if fm.Actor != "" {
		if err := s.parseActor(c.Request().Context(), fm.Actor, &af.f); err != "" {
			fm.Errors["actor"] = err
		} else {
			canon.Set("actor", fm.Actor)
		}
	}
	parseTraceJobFilter(fm, &af.f, canon)
	day := func(field, v string) *time.Time {
		if v == "" {
			return nil
		}
		d, err := time.ParseInLocation("2006-01-02", v, loc)
		if err != nil || d.Year() < 2000 || d.Year() > 9998 {
			fm.Errors[field] = "Enter a date like 2026-11-30."
			return nil
		}
		canon.Set(field, v)
		return &d
	}
	if from := day("from", fm.From); from != nil {
		af.f.From = from
	}
	if to := day("to", fm.To); to != nil {
		// "To" is inclusive for people; the filter's end is exclusive.
		end := to.AddDate(0, 0, 1)
		af.f.To = &end
		if af.f.From != nil && !end.After(*af.f.From) {
			fm.Errors["to"] = "The end date is before the start date."
		}
	}
	af.query = canon.Encode()
	if len(fm.Errors) > 0 {
		return af, errInvalidFilter
	}
	return af, nil
}

var errInvalidFilter = errors.New("invalid audit filter")

// parseQuickSearch reads the quick filter and the name search; the audit
// domain owns both rules (which actions a quick filter means, how long a
// search may be).
func parseQuickSearch(fm *viewtenant.AuditFilterForm, f *audit.Filter, canon url.Values) {
	if fm.Quick != "" {
		if q := audit.QuickFilter(fm.Quick); audit.ValidQuickFilter(q) {
			f.Quick(q)
			canon.Set("quick", fm.Quick)
		} else {
			fm.Errors["quick"] = "Choose one of the quick filters."
		}
	}
	if fm.Q != "" {
		term, err := audit.CheckSearch(fm.Q)
		if err != nil {
			fm.Errors["q"] = apperr.FieldsOf(err)["q"]
		} else {
			f.Search = term
			canon.Set("q", fm.Q)
		}
	}
}

// parseActor sets the actor part of f: "system", "staff", "user", a user
// id, or an e-mail. An e-mail nobody has matches no event (the same answer
// as a person who never acted in this tenant, so it reveals nothing).
func (s *Server) parseActor(ctx context.Context, v string, f *audit.Filter) string {
	switch strings.ToLower(v) {
	case "system":
		f.ActorKind = audit.ActorSystem
		return ""
	case "staff", "support", "support staff":
		f.ActorKind = audit.ActorStaff
		return ""
	case "user", "member":
		f.ActorKind = audit.ActorUser
		return ""
	}
	if id, err := strconv.ParseInt(v, 10, 64); err == nil {
		if id <= 0 {
			return "A user id is a positive number."
		}
		f.ActorID = &id
		return ""
	}
	if a, err := mail.ParseAddress(v); err == nil && a.Address == v && len(v) <= 320 {
		u, err := s.Users.ByEmail(ctx, v)
		var none int64 // no user has id 0
		switch {
		case errors.Is(err, user.ErrNotFound):
			f.ActorID = &none
		case err != nil:
			// Treat a lookup failure like a bad value rather than a 500:
			// the filter is the only thing that depends on it.
			return "Could not look up that e-mail; try the user id."
		default:
			f.ActorID = &u.ID
		}
		return ""
	}
	return "Use system, staff, user, a user id or an e-mail."
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// seqParam reads a sequence number cursor (before/after); a bad one is a
// 400 with a message, never a 500.
func seqParam(c echo.Context, name string) (int64, bool, error) {
	n, err := keyset.Cursor(name, c.QueryParam(name))
	return n, n > 0, err
}

// auditTimeline serves the timeline page, and with htmx its partials: the
// filtered list (filter form), an older page (before=) and the live poll
// (after=).
func (s *Server) auditTimeline(c echo.Context) error {
	ctx := c.Request().Context()
	t := currentTenant(c)
	loc := t.Location()
	before, hasBefore, err := seqParam(c, "before")
	if err != nil {
		return err
	}
	after, hasAfter, err := seqParam(c, "after")
	if err != nil {
		return err
	}
	if hasBefore && hasAfter {
		return echo.NewHTTPError(http.StatusBadRequest, "Use either before or after, not both.")
	}
	// A history restore wants the whole page back.
	partial := isHTMX(c) && c.Request().Header.Get("HX-History-Restore-Request") != "true"

	af, ferr := s.parseAuditFilter(c, loc)
	vm := viewtenant.AuditVM{
		Slug: t.Slug, TenantName: t.Name, Zone: zoneLabel(loc), Form: af.form, Query: af.query,
		Chain: s.chainVM(c, t), Quick: quickLinks(ctx, "/t/"+t.Slug+"/audit", af.form),
	}
	if ferr != nil {
		return auditFilterRefused(c, vm, hasAfter, partial)
	}

	if hasAfter {
		return s.auditPoll(c, t, af, after)
	}

	// A filtered first page also reads the trail's head so its poll starts
	// there (see audit.Service.Timeline).
	page, err := s.Audit.Timeline(ctx, t.ID, af.f, before, auditPageSize, !hasBefore && af.query != "")
	if err != nil {
		return err
	}
	rows := s.auditRows(ctx, t, page.Rows)
	if page.Next != 0 {
		vm.OlderURL = linkWith("/t/"+t.Slug+"/audit", af.query, "before", keyset.Format(page.Next))
		if len(rows) > 0 {
			// The next page heads its first day only when it is a new one.
			vm.OlderURL += "&day=" + rows[len(rows)-1].DayKey
		}
	}
	if hasBefore {
		if d := c.QueryParam("day"); dayKey.MatchString(d) {
			vm.PrevDay = d
		}
	}
	if hasBefore && partial {
		return render(c, http.StatusOK, viewtenant.AuditOlder(rows, vm.OlderURL, vm.PrevDay))
	}
	vm.Rows = rows
	if hasBefore {
		vm.Older = true
	} else {
		s.auditFirstPage(ctx, &vm, t, af, page)
	}
	if partial {
		return render(c, http.StatusOK, viewtenant.AuditMain(vm))
	}
	vm.CanManageTokens = membership(c).CanWrite()
	return render(c, http.StatusOK, viewtenant.AuditPage(vm))
}

// quickLinks are the quick filters as links that keep the name search: a
// chosen one links back to the trail without it.
func quickLinks(ctx context.Context, base string, form viewtenant.AuditFilterForm) []viewtenant.QuickLink {
	out := make([]viewtenant.QuickLink, 0, len(audit.QuickFilters()))
	for _, q := range audit.QuickFilters() {
		v := url.Values{}
		if form.Q != "" && form.Errors["q"] == "" {
			v.Set("q", form.Q)
		}
		active := string(q) == form.Quick
		if !active {
			v.Set("quick", string(q))
		}
		out = append(out, viewtenant.QuickLink{Key: string(q), Label: i18n.Enum(ctx, "audit.quick", string(q)),
			URL: linkWith(base, v.Encode(), "", ""), Active: active})
	}
	return out
}

// auditFilterRefused answers a timeline request whose filter does not
// parse: the form with its errors, or nothing for a poll.
func auditFilterRefused(c echo.Context, vm viewtenant.AuditVM, poll, partial bool) error {
	if poll {
		// A poll cannot show a form; stop polling quietly.
		return c.NoContent(http.StatusNoContent)
	}
	if partial {
		return render(c, http.StatusUnprocessableEntity, viewtenant.AuditMain(vm))
	}
	return render(c, http.StatusUnprocessableEntity, viewtenant.AuditPage(vm))
}

// auditFirstPage adds what only the newest page has: today's heading and
// the live poll.
func (s *Server) auditFirstPage(ctx context.Context, vm *viewtenant.AuditVM, t *tenant.Tenant, af auditFilter, page audit.TimelinePage) {
	loc := t.Location()
	now := s.now()
	vm.TodayKey, vm.Today = now.In(loc).Format(time.DateOnly), i18n.DayLabel(i18n.Lang(ctx), now, now, loc)
	// The first page polls for what arrives after its newest event or the
	// head, whichever is later.
	newest := page.Head
	if len(page.Rows) > 0 && page.Rows[0].ID > newest {
		newest = page.Rows[0].ID
	}
	vm.PollURL = linkWith("/t/"+t.Slug+"/audit", af.query, "after", strconv.FormatInt(newest, 10))
}

// auditPoll answers the live poll: 204 when nothing arrived (htmx leaves
// the page alone), else the new events newest first under a new poller.
func (s *Server) auditPoll(c echo.Context, t *tenant.Tenant, af auditFilter, after int64) error {
	ctx := c.Request().Context()
	events, through, err := s.Audit.Poll(ctx, t.ID, af.f, after, auditPollLimit)
	if err != nil {
		return err
	}
	if len(events) == 0 && through == after {
		return c.NoContent(http.StatusNoContent)
	}
	// Newer reads oldest first; the list shows newest first.
	for i, j := 0, len(events)-1; i < j; i, j = i+1, j-1 {
		events[i], events[j] = events[j], events[i]
	}
	rows := s.auditRows(ctx, t, events)
	pollURL := linkWith("/t/"+t.Slug+"/audit", af.query, "after", strconv.FormatInt(through, 10))
	return render(c, http.StatusOK, viewtenant.AuditNewer(pollURL, rows))
}

// auditEvent serves one event's record: the fragment "Details" fetches
// with htmx, or the event's own page (the link without JavaScript).
func (s *Server) auditEvent(c echo.Context) error {
	id, err := positiveParam(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	t := currentTenant(c)
	e, err := s.Audit.Event(ctx, t.ID, id)
	if err != nil {
		return err
	}
	row := s.auditRows(ctx, t, []audit.Recorded{e})[0]
	row.RecordURL, row.Open = "", true
	if isHTMX(c) {
		return render(c, http.StatusOK, components.AuditRecord(row))
	}
	return render(c, http.StatusOK, viewtenant.EventPage(viewtenant.EventVM{Slug: t.Slug, TenantName: t.Name, Row: row}))
}

// auditEntity is one entity's history. An entity with no event in this
// tenant is a 404, exactly like one that exists only in another tenant.
func (s *Server) auditEntity(c echo.Context) error {
	ctx := c.Request().Context()
	t := currentTenant(c)
	entity, entityID := pathParam(c, "entity"), pathParam(c, "id")
	if entity == "" || len(entity) > 100 || len(entityID) > 200 || !printable(entity) || !printable(entityID) {
		return tenant.ErrNotFound
	}
	h, err := s.Audit.EntityHistory(ctx, t.ID, entity, entityID)
	if err != nil {
		return err
	}
	if len(h.Events) == 0 {
		return tenant.ErrNotFound
	}
	return render(c, http.StatusOK, viewtenant.EntityPage(viewtenant.EntityVM{
		Slug: t.Slug, TenantName: t.Name, Entity: entity, EntityID: entityID, Name: h.Name,
		EntityLabel: i18n.Enum(c.Request().Context(), "entity", entity),
		Rows:        s.auditRows(ctx, t, h.Events),
		Truncated:   len(h.Events) >= audit.MaxEntityHistory,
		TimelineURL: linkWith("/t/"+t.Slug+"/audit", url.Values{"entity": {entity}, "entity_id": {entityID}}.Encode(), "", ""),
	}))
}

// pathParam returns a path parameter unescaped (echo hands over the raw
// segment when the path holds escapes such as %2F).
func pathParam(c echo.Context, name string) string {
	v := c.Param(name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// auditExport streams the current filter as CSV or JSON Lines.
func (s *Server) auditExport(format string) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		t := currentTenant(c)
		af, err := s.parseAuditFilter(c, t.Location())
		if err != nil {
			return echo.NewHTTPError(http.StatusUnprocessableEntity, i18n.T(ctx, "audit.export_invalid", joinErrors(ctx, af.form.Errors)))
		}
		h := c.Response().Header()
		name := t.Slug + "-audit"
		switch format {
		case audit.FormatCSV:
			h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
			name += ".csv"
		default:
			h.Set(echo.HeaderContentType, "application/jsonl; charset=utf-8")
			name += ".jsonl"
		}
		h.Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`"`)
		h.Set("Cache-Control", "no-store")
		err = s.Audit.Export(ctx, t.ID, viewer(c).UserID, format, af.f, c.Response())
		if err != nil && !c.Response().Committed {
			// Nothing sent yet: answer a normal error page instead.
			h.Del(echo.HeaderContentDisposition)
			h.Del(echo.HeaderContentType)
			return err
		}
		if err != nil {
			// Mid-stream: the status is sent; log and cut the download short.
			s.Logger.ErrorContext(ctx, "audit export failed", "tenant_id", t.ID, "error", err.Error())
		}
		return nil
	}
}

func joinErrors(ctx context.Context, m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + i18n.T(ctx, m[k])
	}
	return strings.Join(parts, "; ")
}

// verifyResult is a verification outcome kept in the session, so the page
// shows it after the post/redirect/get and on later visits.
type verifyResult struct {
	OK       bool      `json:"ok"`
	Through  int64     `json:"through"`
	FirstBad int64     `json:"first_bad"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

func verifyKey(tenantID int64) string { return "audit_verify:" + strconv.FormatInt(tenantID, 10) }

// auditVerify re-runs the chain verification for this tenant and shows the
// result. It reads the whole trail, so only owners and admins may start it,
// and it runs once at a time per tenant, free until the head moves
// (audit.Verifier).
func (s *Server) auditVerify(c echo.Context) error {
	ctx := c.Request().Context()
	t := currentTenant(c)
	if !membership(c).CanWrite() {
		return echo.NewHTTPError(http.StatusForbidden, "Only owners and admins verify the chain.")
	}
	res, err := s.Audit.Verify(ctx, t.ID)
	if errors.Is(err, audit.ErrVerifyBusy) && isHTMX(c) {
		// htmx swaps no 409, so the refusal is said inside the fragment;
		// without htmx the 409 error page says it.
		vm := s.chainVM(c, t)
		vm.Busy = true
		return render(c, http.StatusOK, viewtenant.ChainStatus(vm))
	}
	if err != nil {
		return err
	}
	// The injected clock is nil in production (the database's time); the
	// moment shown is only informational, so the web server's own clock
	// stands in then.
	at := time.Now()
	if now := s.Clock.Now(); now != nil {
		at = *now
	}
	b, err := json.Marshal(verifyResult{OK: res.OK, Through: res.CheckedThrough, FirstBad: res.FirstBadSeq, Reason: res.Reason, At: at})
	if err != nil {
		return fmt.Errorf("encode verification result: %w", err)
	}
	s.sessions.Put(ctx, verifyKey(t.ID), string(b))
	if !res.OK {
		s.Logger.WarnContext(ctx, "audit chain broken", "tenant_id", t.ID, "first_bad_seq", res.FirstBadSeq, "reason", res.Reason)
	}
	if !isHTMX(c) {
		return c.Redirect(http.StatusSeeOther, "/t/"+t.Slug+"/audit")
	}
	return render(c, http.StatusOK, viewtenant.ChainStatus(s.chainVM(c, t)))
}

// chainVM is the chain status from this session's last verification.
func (s *Server) chainVM(c echo.Context, t *tenant.Tenant) viewtenant.ChainVM {
	vm := viewtenant.ChainVM{Slug: t.Slug, CanVerify: membership(c).CanWrite()}
	raw := s.sessions.GetString(c.Request().Context(), verifyKey(t.ID))
	var r verifyResult
	if raw == "" || json.Unmarshal([]byte(raw), &r) != nil {
		return vm
	}
	vm.Verified, vm.OK, vm.Through, vm.FirstBad, vm.Reason = true, r.OK, r.Through, r.FirstBad, r.Reason
	vm.At = shownTime(c.Request().Context(), r.At.In(t.Location()))
	return vm
}

// auditRows turns events into rows; the timeline queries already named
// the people in them.
func (s *Server) auditRows(ctx context.Context, t *tenant.Tenant, events []audit.Recorded) []components.AuditRow {
	times := newRowTimes(ctx, t.Location(), s.now())
	base := "/t/" + t.Slug + "/audit/"
	rows := make([]components.AuditRow, len(events))
	for i, e := range events {
		r := components.AuditRow{
			ID: e.ID, Seq: e.Seq, TimeISO: e.OccurredAt.UTC().Format(time.RFC3339),
			ActorKind: string(e.ActorKind), ActorName: e.ActorName, Action: e.Action, Entity: e.Entity, EntityID: e.EntityID,
			TraceID: e.TraceID, JobID: e.JobID,
		}
		if e.ActorID != nil {
			r.ActorID = *e.ActorID
		}
		if e.ActorKind == audit.ActorStaff {
			r.ActorName = staffName(ctx, e.ActorName, e.ActorRole)
		}
		w := s.words.words(ctx, e, r.ActorName)
		r.Sentence, r.Detail = w.sentence, w.detail
		if e.EntityID != "" {
			r.EntityURL = base + url.PathEscape(e.Entity) + "/" + url.PathEscape(e.EntityID)
		}
		if e.Sealed() {
			r.ProofURL = base + "log/bundle?seq=" + strconv.FormatInt(e.Seq, 10)
		}
		r.RecordURL = base + "event?id=" + strconv.FormatInt(e.ID, 10)
		times.describe(&r, e)
		rows[i] = r
	}
	return rows
}

// prettyJSON indents a detail object for reading; "" for an empty one.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "{}" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// linkWith returns path?query plus one more parameter (when key is set).
func linkWith(path, query, key, value string) string {
	if key != "" {
		if query != "" {
			query += "&"
		}
		query += url.QueryEscape(key) + "=" + url.QueryEscape(value)
	}
	if query == "" {
		return path
	}
	return path + "?" + query
}

// zoneLabel names a time zone for readers: "WIB (Asia/Jakarta)".
func zoneLabel(loc *time.Location) string {
	abbr, _ := time.Date(2026, 1, 1, 0, 0, 0, 0, loc).Zone()
	if abbr == loc.String() || strings.HasPrefix(abbr, "+") || strings.HasPrefix(abbr, "-") {
		return loc.String()
	}
	return abbr + " (" + loc.String() + ")"
}
