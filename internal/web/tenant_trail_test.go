package web_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
)

// trailStory records, over the last three days, a project created,
// deleted and created again under the same name, a plan change, points,
// a weekly report and a staff member reading the trail. It returns the
// deleted project's id and its successor's.
func trailStory(f *fixture) (oldID, newID string) {
	f.t.Helper()
	budi, sinta := f.userID("budi@melati.test"), f.userID("support@jejak.test")
	now := time.Now()
	clk := clock.NewFrozen(now.Add(-72 * time.Hour))
	user := func(at time.Duration, action, entity, eid, detail string) {
		clk.Set(now.Add(-at))
		f.record(melati, clk, audit.Event{ActorKind: audit.ActorUser, ActorID: &budi, Action: action, Entity: entity,
			EntityID: eid, Detail: json.RawMessage(detail)})
	}
	user(70*time.Hour, "project.create", "project", "801", `{"name": "Katalog Musim Hujan"}`)
	user(69*time.Hour, "project.create", "project", "802", `{"name": "Lookbook Lebaran"}`)
	user(50*time.Hour, "project.delete", "project", "801", `{"name": "Katalog Musim Hujan"}`)
	user(49*time.Hour, "subscription.change", "subscription", "1", `{"from_plan": "pro", "to_plan": "basic"}`)
	user(48*time.Hour, "project.create", "project", "803", `{"name": "Katalog Musim Hujan"}`)
	clk.Set(now.Add(-47 * time.Hour))
	f.record(melati, clk,
		audit.Event{ActorKind: audit.ActorSystem, Action: "points.awarded", Entity: "customer", EntityID: "cust-7",
			Detail: json.RawMessage(`{"points": 1, "reason": "order 12", "message_id": "m1"}`)},
		audit.Event{ActorKind: audit.ActorSystem, Action: "report.sent", Entity: "report", EntityID: "<r1@jejak>",
			Detail: json.RawMessage(`{"recipients": 2, "week_start": "2026-11-23T00:00:00Z"}`)},
		audit.Event{ActorKind: audit.ActorStaff, ActorID: &sinta, Action: "staff.viewed_audit", Entity: "audit",
			EntityID: "1", Detail: json.RawMessage(`{"page": "first"}`)})
	return "801", "803"
}

var (
	eventItem = regexp.MustCompile(`(?s)<li class="audit-event".*?</li>`)
	// oneLine is an event's line: its clock time (the relative time and
	// the full moment in the tooltip), the sentence, then "Details".
	oneLine = regexp.MustCompile(`(?s)^<li class="audit-event"[^>]*><time class="when" datetime="[^"]+" title="([^"]+)" data-testid="audit-time">(\d\d:\d\d)</time>\s*` +
		`(<p class="sentence" data-testid="audit-sentence">|<div class="sentence raw-line">).*?</(p|div)>\s*<details class="raw"[^>]*><summary>`)
	tags     = regexp.MustCompile(`<[^>]*>`)
	listItem = regexp.MustCompile(`<li (?:id="[^"]*" )?class="([^"]*)"[^>]*?( hidden)?>`)
)

// checkTrailList fails when an event is not one line, or when a day
// heading that shows has no event under it.
func checkTrailList(t *testing.T, name, body string) {
	t.Helper()
	items := eventItem.FindAllString(body, -1)
	if len(items) == 0 {
		t.Fatalf("%s: no events", name)
	}
	for _, it := range items {
		m := oneLine.FindStringSubmatch(it)
		if m == nil {
			t.Fatalf("%s: event is not one line of time · sentence · details:\n%s", name, it)
		}
		if !strings.Contains(m[1], " · ") || !strings.Contains(m[1], ":") {
			t.Errorf("%s: time tooltip %q lacks the relative time and the full moment", name, m[1])
		}
	}
	lis := listItem.FindAllStringSubmatch(body, -1)
	for i, li := range lis {
		if !strings.HasPrefix(li[1], "audit-day") || li[2] != "" {
			continue
		}
		next := ""
		for _, n := range lis[i+1:] {
			if n[1] != "audit-poll" {
				next = n[1]
				break
			}
		}
		if next != "audit-event" {
			t.Errorf("%s: a day heading shows with no event under it (next: %q)", name, next)
		}
	}
}

// TestTrailPageReadsAtAGlance: every event is one line with its clock
// time; a filtered view shows no empty day heading (today's heading waits,
// hidden, for live events); quick filters and the name search narrow the
// trail; staff are named once with their role; the actions that used to
// show raw JSON read as sentences with their plurals right.
func TestTrailPageReadsAtAGlance(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	trailStory(f)
	c := f.client()
	c.login("budi@melati.test")

	all := c.get("/t/" + melati + "/audit")
	if all.status != http.StatusOK {
		t.Fatalf("trail: %d", all.status)
	}
	checkTrailList(t, "trail", all.body)
	text := tags.ReplaceAllString(all.body, "")
	for _, want := range []string{
		"Sinta Maharani (support) viewed your audit trail",
		"awarded 1 point to customer",
		"sent the weekly report for the week of 23 Nov 2026 to 2 recipients",
		"Filters", "Deletions", "Plan &amp; billing", "Members &amp; access", "Staff actions on my data", "Sign-ins", "Search names",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("trail lacks %q", want)
		}
	}
	if strings.Contains(all.body, "(support) (support)") || strings.Contains(all.body, "1 points") {
		t.Error("trail names staff twice or gets a plural wrong")
	}

	cases := []struct {
		query string
		want  []string
	}{
		{"quick=deletions", []string{"project.delete"}},
		{"quick=billing", []string{"subscription.change"}},
		{"quick=staff", []string{"staff.viewed_audit"}},
		{"quick=jobs", []string{"report.sent", "points.awarded"}},
		{"q=Katalog", []string{"project.create", "project.delete", "project.create"}},
		{"q=katalog&quick=deletions", []string{"project.delete"}},
		{"q=lookbook", []string{"project.create"}},
	}
	for _, tc := range cases {
		a := c.get("/t/" + melati + "/audit?" + tc.query)
		if a.status != http.StatusOK {
			t.Fatalf("%s: %d", tc.query, a.status)
		}
		if got := actions(a.body); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: %v, want %v", tc.query, got, tc.want)
		}
		checkTrailList(t, tc.query, a.body)
		// The filtered trail starts days ago: today's heading is there
		// for live events, hidden until one arrives.
		if !strings.Contains(a.body, `data-testid="audit-day-live"`) {
			t.Errorf("%s: no hidden heading for live events", tc.query)
		}
		if !strings.Contains(a.body, `href="/t/`+melati+`/audit/export.csv?`) {
			t.Errorf("%s: the export does not carry the filter", tc.query)
		}
	}

	// The export carries the quick filter and the search.
	f.seal()
	for query, want := range map[string]string{
		"quick=deletions":           "project.delete",
		"q=katalog":                 "project.create,project.delete,project.create",
		"q=katalog&quick=deletions": "project.delete",
	} {
		a := c.get("/t/" + melati + "/audit/export.jsonl?" + query)
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(a.body), "\n") {
			var ev struct {
				Action string `json:"action"`
			}
			if json.Unmarshal([]byte(l), &ev) == nil && ev.Action != "" {
				got = append([]string{ev.Action}, got...) // the export is oldest first
			}
		}
		if a.status != http.StatusOK || strings.Join(got, ",") != want {
			t.Errorf("export %s: %d %v, want %s", query, a.status, got, want)
		}
	}

	// A quick filter shows as chosen, and its link clears it.
	del := c.get("/t/" + melati + "/audit?quick=deletions")
	if !regexp.MustCompile(`href="/t/` + melati + `/audit" [^>]*data-testid="quick-deletions" aria-current="true"`).MatchString(del.body) {
		t.Error("the chosen quick filter is not marked or does not link back to the whole trail")
	}

	for _, bad := range []string{"q=ab", "quick=project.delete"} {
		a := c.get("/t/" + melati + "/audit?" + bad)
		if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `data-testid="field-error-`) {
			t.Errorf("%s: %d, want 422 with the message by the field", bad, a.status)
		}
		if len(actions(a.body)) != 0 {
			t.Errorf("%s: events shown for a refused filter", bad)
		}
	}

	// Indonesian: the staff read is a sentence too, with the role in it.
	id := c.getLang("/t/"+melati+"/audit?quick=staff", "id")
	if !strings.Contains(tags.ReplaceAllString(id.body, ""), "Sinta Maharani (tim dukungan) melihat jejak audit Anda") {
		t.Error("Indonesian trail lacks the staff read as a sentence")
	}
}

// TestEntityHistoryTitledByName: a project's history is titled by its
// name and gathers the events of a namesake created after it was deleted;
// another project's events stay out.
func TestEntityHistoryTitledByName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	oldID, newID := trailStory(f)
	c := f.client()
	c.login("budi@melati.test")
	for _, id := range []string{oldID, newID} {
		a := c.get("/t/" + melati + "/audit/project/" + id)
		if a.status != http.StatusOK {
			t.Fatalf("history of %s: %d", id, a.status)
		}
		if !strings.Contains(a.body, `<h1 data-testid="entity-title">History of project Katalog Musim Hujan</h1>`) ||
			!strings.Contains(a.body, "<title>History of project Katalog Musim Hujan") {
			t.Errorf("history of project %s is not titled by its name", id)
		}
		var got []string
		for _, m := range eventAttr.FindAllStringSubmatch(a.body, -1) {
			got = append(got, m[2])
		}
		if strings.Join(got, ",") != "project.create,project.delete,project.create" {
			t.Errorf("history of project %s: %v", id, got)
		}
		checkTrailList(t, "history "+id, a.body)
	}
	if a := c.getLang("/t/"+melati+"/audit/project/"+strconv.Quote(oldID)[1:len(oldID)+1], "id"); !strings.Contains(a.body, "Riwayat proyek Katalog Musim Hujan") {
		t.Error("Indonesian history is not titled by the name")
	}
}

var recordLink = regexp.MustCompile(`<details class="raw" hx-get="(/t/[^"?]+/audit/event\?id=\d+)"`)

// records fetches, as htmx does when "Details" is opened, the record of
// every event in body, in the order they appear.
func records(t *testing.T, c *client, body string) []string {
	t.Helper()
	var out []string
	for _, m := range recordLink.FindAllStringSubmatch(body, -1) {
		a := c.getHTMX(m[1])
		if a.status != http.StatusOK {
			t.Fatalf("record %s: %d %.300s", m[1], a.status, a.body)
		}
		out = append(out, a.body)
	}
	return out
}

// withRecords is body followed by the records of its events.
func withRecords(t *testing.T, c *client, body string) string {
	t.Helper()
	return body + strings.Join(records(t, c, body), "")
}

// TestEventRecordLoadsWhenOpened: the trail's lines carry no record, only
// where to fetch it (and whether the event is sealed yet); the record
// comes as a fragment for htmx or as the event's own page, to the tenant's
// members only, and a bad or foreign id changes nothing and shows nothing.
func TestEventRecordLoadsWhenOpened(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	sealed := f.record(melati, nil, audit.Event{ActorKind: audit.ActorSystem, Action: "order.paid", Entity: "order",
		EntityID: "A-7", TraceID: trace, Detail: json.RawMessage(`{"amount": 150000}`)})[0]
	f.seal()
	fresh := f.record(melati, nil, audit.Event{ActorKind: audit.ActorSystem, Action: "order.refunded", Entity: "order",
		EntityID: "A-7", Detail: json.RawMessage(`{"amount": 20000}`)})[0]
	foreign := f.record(senja, nil, audit.Event{ActorKind: audit.ActorSystem, Action: "order.paid", Entity: "order",
		EntityID: "S-1", Detail: json.RawMessage(`{"secret_amount": 777}`)})[0]
	c := f.client()
	c.login("budi@melati.test")

	page := c.get("/t/" + melati + "/audit?entity=order").body
	for _, absent := range []string{trace, "150000", `data-testid="audit-detail"`, `data-testid="audit-proof"`} {
		if strings.Contains(page, absent) {
			t.Fatalf("the trail carries the record (%s) before it is opened: %.3000s", absent, page)
		}
	}
	item := func(id int64) string {
		m := regexp.MustCompile(`(?s)<li class="audit-event"[^>]*data-id="` + strconv.FormatInt(id, 10) + `".*?</li>`).FindString(page)
		if m == "" {
			t.Fatalf("event %d not on the trail: %.3000s", id, page)
		}
		return m
	}
	recordURL := func(id int64) string { return "/t/" + melati + "/audit/event?id=" + strconv.FormatInt(id, 10) }
	for _, e := range []audit.Recorded{sealed, fresh} {
		it := item(e.ID)
		if !strings.Contains(it, `hx-get="`+recordURL(e.ID)+`"`) || !strings.Contains(it, `href="`+recordURL(e.ID)+`" data-testid="audit-record-link"`) {
			t.Fatalf("event %d's Details neither fetches nor links its record: %s", e.ID, it)
		}
		if unsealed := strings.Contains(it, `data-testid="audit-unsealed"`); unsealed != (e.ID == fresh.ID) {
			t.Fatalf("event %d (sealed: %v) marked unsealed on its line: %v", e.ID, e.ID == sealed.ID, unsealed)
		}
	}

	rec := c.getHTMX(recordURL(sealed.ID))
	if rec.status != http.StatusOK || strings.Contains(rec.body, "<html") || !strings.Contains(rec.body, "&#34;amount&#34;: 150000") ||
		!strings.Contains(rec.body, trace) || !strings.Contains(rec.body, `/audit/log/bundle?seq=`) {
		t.Fatalf("sealed event's record: %d %.2000s", rec.status, rec.body)
	}
	if rec = c.getHTMX(recordURL(fresh.ID)); rec.status != http.StatusOK || !strings.Contains(rec.body, "20000") || strings.Contains(rec.body, `data-testid="audit-proof"`) {
		t.Fatalf("unsealed event's record (no proof yet): %d %.2000s", rec.status, rec.body)
	}
	// Without JavaScript the link opens the event's own page, unfolded.
	if own := c.get(recordURL(sealed.ID)); own.status != http.StatusOK || !strings.Contains(own.body, "<title>Audit event "+strconv.FormatInt(sealed.ID, 10)) ||
		!strings.Contains(own.body, `data-testid="event-title">Audit event `+strconv.FormatInt(sealed.ID, 10)+`<`) ||
		!strings.Contains(own.body, `<details class="raw" open>`) || !strings.Contains(own.body, "&#34;amount&#34;: 150000") {
		t.Fatalf("event's own page: %d %.2000s", own.status, own.body)
	}

	for _, id := range []string{"", "abc", "0", "-3", "1.5", "99999999999999999999"} {
		if a := c.getHTMX("/t/" + melati + "/audit/event?id=" + id); a.status != http.StatusBadRequest {
			t.Errorf("id %q: %d, want 400", id, a.status)
		}
	}
	for _, id := range []int64{foreign.ID, foreign.ID + 1000, 9223372036854775807} {
		a := c.getHTMX(recordURL(id))
		if a.status != http.StatusNotFound || strings.Contains(a.body, "777") {
			t.Errorf("id %d (another tenant's, or none): %d %.300s, want 404 showing nothing", id, a.status, a.body)
		}
	}
}
