package web_test

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
)

const (
	melati = "toko-bunga-melati"
	senja  = "kopi-senja"
)

// getHTMX sends a GET as htmx does (HX-Request), for the partials.
func (c *client) getHTMX(path string) answer {
	req, _ := http.NewRequest(http.MethodGet, c.f.srv.URL+path, nil)
	req.Header.Set("HX-Request", "true")
	return c.do(req)
}

// record appends events to slug's trail through the app pool, as the
// services do, with times from clk (nil: the database's now()).
func (f *fixture) record(slug string, clk clock.Clock, events ...audit.Event) []audit.Recorded {
	f.t.Helper()
	ctx := context.Background()
	tid := f.tenantID(slug)
	rec := audit.NewRecorder(clk)
	var out []audit.Recorded
	err := database.InTenantTx(ctx, f.db.App, tid, func(tx pgx.Tx) error {
		for _, e := range events {
			e.TenantID = tid
			r, err := rec.Record(ctx, tx, e)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		f.t.Fatalf("record events in %s: %v", slug, err)
	}
	return out
}

// systemEvents makes n system events with the given action.
func systemEvents(n int, action string) []audit.Event {
	out := make([]audit.Event, n)
	for i := range out {
		out[i] = audit.Event{ActorKind: audit.ActorSystem, Action: action, Entity: "report",
			EntityID: strconv.Itoa(i + 1), Detail: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i+1))}
	}
	return out
}

var eventAttr = regexp.MustCompile(`data-testid="audit-event" data-seq="(\d+)" data-action="([^"]*)" data-id="(\d+)"`)

// ids returns the event ids of the rendered events, in page order (an
// event has its id at once, its seq only once sealed).
func ids(body string) []int64 {
	var out []int64
	for _, m := range eventAttr.FindAllStringSubmatch(body, -1) {
		n, _ := strconv.ParseInt(m[3], 10, 64)
		out = append(out, n)
	}
	return out
}

// seqs returns the rendered events' seqs (0 for one not sealed yet).
func seqs(body string) []int64 {
	var out []int64
	for _, m := range eventAttr.FindAllStringSubmatch(body, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		out = append(out, n)
	}
	return out
}

// actions returns the actions of the rendered events, in page order.
func actions(body string) []string {
	var out []string
	for _, m := range eventAttr.FindAllStringSubmatch(body, -1) {
		out = append(out, m[2])
	}
	return out
}

var olderHref = regexp.MustCompile(`href="([^"]*before=[^"]*)"`)

// TestAuditRoutesAccess checks every tenant audit/jobs route for the
// owner, a member (read-only works), another tenant's owner (404 that
// leaks nothing) and an anonymous visitor (sent to sign in).
func TestAuditRoutesAccess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pid := f.projectID(melati, "Katalog Musim Hujan")
	f.record(melati, nil, audit.Event{ActorKind: audit.ActorUser, ActorID: ptr(f.userID("budi@melati.test")),
		Action: "project.rename", Entity: "project", EntityID: strconv.FormatInt(pid, 10),
		Detail: json.RawMessage(`{"secret_marker": "melati-only"}`)})
	f.seal() // exports hold the sealed log
	entity := fmt.Sprintf("/t/%s/audit/project/%d", melati, pid)
	routes := []string{"/t/" + melati + "/audit", entity, "/t/" + melati + "/audit/export.csv",
		"/t/" + melati + "/audit/export.jsonl", "/t/" + melati + "/jobs"}

	clients := map[string]*client{}
	for _, email := range []string{"budi@melati.test", "rina@melati.test", "sari@senja.test"} {
		c := f.client()
		c.login(email)
		clients[email] = c
	}
	clients["anonymous"] = f.client()

	for _, route := range routes {
		for _, who := range []string{"budi@melati.test", "rina@melati.test", "sari@senja.test", "anonymous"} {
			t.Run(who+" "+route, func(t *testing.T) {
				a := clients[who].get(route)
				switch who {
				case "budi@melati.test", "rina@melati.test":
					if a.status != http.StatusOK {
						t.Fatalf("status %d: %.300s", a.status, a.body)
					}
					// The detail is in the record "Details" fetches.
					if !strings.Contains(route, "/jobs") && !strings.Contains(withRecords(t, clients[who], a.body), "melati-only") {
						t.Fatalf("own event missing: %.500s", a.body)
					}
				case "sari@senja.test":
					if a.status != http.StatusNotFound {
						t.Fatalf("status %d, want 404", a.status)
					}
					for _, leak := range []string{"melati-only", "project.rename", "Budi", "Toko Bunga"} {
						if strings.Contains(a.body, leak) {
							t.Fatalf("404 page leaks %q", leak)
						}
					}
				default:
					if a.status != http.StatusSeeOther || a.location != "/login" {
						t.Fatalf("anonymous: %d %q", a.status, a.location)
					}
				}
			})
		}
	}

	t.Run("verify", func(t *testing.T) {
		for who, want := range map[string]int{"budi@melati.test": http.StatusSeeOther, "rina@melati.test": http.StatusForbidden, "sari@senja.test": http.StatusNotFound} {
			c := clients[who]
			if a := c.post("/t/"+melati+"/audit/verify", c.withCSRF(nil), false); a.status != want {
				t.Fatalf("%s verify: %d, want %d", who, a.status, want)
			}
		}
		anon := clients["anonymous"]
		if a := anon.post("/t/"+melati+"/audit/verify", anon.withCSRF(nil), false); a.status != http.StatusSeeOther || a.location != "/login" {
			t.Fatalf("anonymous verify: %d %q", a.status, a.location)
		}
		budi := clients["budi@melati.test"]
		if a := budi.post("/t/"+melati+"/audit/verify", url.Values{}, false); a.status != http.StatusForbidden {
			t.Fatalf("verify without CSRF: %d", a.status)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// TestAuditTimelineRendersEvents checks one row's content: actor names
// looked up, staff and system shown as such, time in the tenant's zone,
// detail pretty-printed and escaped, entity linked, trace id; newest first.
func TestAuditTimelineRendersEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	clk := clock.NewFrozen(time.Date(2026, 11, 30, 2, 15, 0, 0, time.UTC)) // 09:15 WIB
	budi, sinta := f.userID("budi@melati.test"), f.userID("support@jejak.test")
	f.record(melati, clk,
		audit.Event{ActorKind: audit.ActorUser, ActorID: &budi, Action: "project.create", Entity: "project", EntityID: "7",
			Detail: json.RawMessage(`{"name": "<script>alert(1)</script>", "n": 1}`), TraceID: "trace-abc-123"},
		audit.Event{ActorKind: audit.ActorStaff, ActorID: &sinta, Action: "job.retry", Entity: "job", EntityID: "99",
			Detail: json.RawMessage(`{"reason": "smtp fixed"}`)},
		audit.Event{ActorKind: audit.ActorSystem, Action: "report.sent", Entity: "report", EntityID: "2026-11"},
	)
	c := f.client()
	c.login("budi@melati.test")
	a := c.get("/t/" + melati + "/audit")
	if a.status != http.StatusOK {
		t.Fatalf("timeline: %d", a.status)
	}
	a.body = withRecords(t, c, a.body)
	got := actions(a.body)
	// The sign-in just now is the newest event; then ours, newest first.
	if len(got) < 4 || got[0] != "auth.signin" || got[1] != "report.sent" || got[2] != "job.retry" || got[3] != "project.create" {
		t.Fatalf("order: %v", got)
	}
	for _, want := range []string{
		"Budi Santoso",                             // user name looked up
		"Sinta Maharani (support)",                 // staff member named once, with the role
		`<span class="badge system">system`,        // system actor
		"30 Nov 2026 09:15:00 WIB",                 // tenant zone (Asia/Jakarta)
		"&lt;script&gt;alert(1)&lt;/script&gt;",    // escaped detail
		"  &#34;reason&#34;: &#34;smtp fixed&#34;", // pretty-printed (indented)
		"trace-abc-123",
		`href="/t/toko-bunga-melati/audit/project/7"`,
		`href="/t/toko-bunga-melati/audit/job/99"`,
	} {
		if !strings.Contains(a.body, want) {
			t.Errorf("timeline lacks %q", want)
		}
	}
	if strings.Contains(a.body, "<script>alert") {
		t.Fatal("detail rendered unescaped")
	}
}

// TestAuditFilters checks that every filter narrows the timeline, alone,
// and that the export links carry the filter.
func TestAuditFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	budi, rina, sinta := f.userID("budi@melati.test"), f.userID("rina@melati.test"), f.userID("support@jejak.test")
	clk := clock.NewFrozen(time.Date(2026, 11, 9, 20, 0, 0, 0, time.UTC)) // 10 Nov 03:00 WIB
	ev := func(kind audit.ActorKind, id *int64, action, entity, eid string) audit.Event {
		return audit.Event{ActorKind: kind, ActorID: id, Action: action, Entity: entity, EntityID: eid}
	}
	f.record(melati, clk, ev(audit.ActorUser, &budi, "project.create", "project", "1"))
	clk.Set(time.Date(2026, 11, 10, 18, 0, 0, 0, time.UTC)) // 11 Nov 01:00 WIB
	f.record(melati, clk, ev(audit.ActorUser, &rina, "project.delete", "project", "1"))
	clk.Set(time.Date(2026, 11, 11, 16, 59, 0, 0, time.UTC)) // 11 Nov 23:59 WIB
	f.record(melati, clk, ev(audit.ActorStaff, &sinta, "job.retry", "job", "5"))
	clk.Set(time.Date(2026, 11, 12, 1, 0, 0, 0, time.UTC)) // 12 Nov 08:00 WIB
	f.record(melati, clk, ev(audit.ActorSystem, nil, "report.sent", "report", "nov"))

	c := f.client()
	c.login("rina@melati.test") // a member reads too; her sign-in is "now"
	cases := []struct {
		query string
		want  []string
	}{
		{"action=project.create", []string{"project.create"}},
		{"entity=job", []string{"job.retry"}},
		{"entity=project&entity_id=1", []string{"project.delete", "project.create"}},
		{"actor=system", []string{"report.sent"}},
		{"actor=staff", []string{"job.retry"}},
		{"actor=" + strconv.FormatInt(budi, 10), []string{"project.create"}},
		{"actor=budi%40melati.test", []string{"project.create"}},
		{"actor=nobody%40nowhere.test", nil},
		{"from=2026-11-11&to=2026-11-11", []string{"job.retry", "project.delete"}},
		{"from=2026-11-12&to=2026-11-12", []string{"report.sent"}},
		{"to=2026-11-10", []string{"project.create"}},
		{"action=project.delete&actor=" + strconv.FormatInt(budi, 10), nil},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			a := c.get("/t/" + melati + "/audit?" + tc.query)
			if a.status != http.StatusOK {
				t.Fatalf("status %d: %.300s", a.status, a.body)
			}
			if got := actions(a.body); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			// The same filter through htmx answers the partial only.
			h := c.getHTMX("/t/" + melati + "/audit?" + tc.query)
			if h.status != http.StatusOK || strings.Contains(h.body, "<html") || !strings.Contains(h.body, `id="audit-main"`) {
				t.Fatalf("htmx filter: %d %.200s", h.status, h.body)
			}
			if got := actions(h.body); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("htmx got %v, want %v", got, tc.want)
			}
			if !strings.Contains(a.body, "/audit/export.csv?") {
				t.Fatal("export link does not carry the filter")
			}
		})
	}
}

// TestAuditBadFilters: invalid filter values answer 422 with the message
// next to the field; bad cursors answer 400; neither is a 500.
func TestAuditBadFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login("budi@melati.test")
	base := "/t/" + melati + "/audit"
	cases := []struct {
		query, field string
	}{
		{"action=DROP+TABLE", "action"},
		{"from=31-12-2026", "from"},
		{"to=2026-02-30", "to"},
		{"from=2026-11-12&to=2026-11-01", "to"},
		{"from=2026-11-12&to=2026-11-11", "to"},
		{"actor=%40%40", "actor"},
		{"actor=-4", "actor"},
		{"entity=%01x", "entity"},
		{"entity_id=5", "entity"},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			a := c.get(base + "?" + tc.query)
			if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `data-testid="field-error-`+tc.field+`"`) {
				t.Fatalf("got %d, want 422 with an error on %s: %.600s", a.status, tc.field, a.body)
			}
			if len(seqs(a.body)) != 0 {
				t.Fatal("rows shown for an invalid filter")
			}
			h := c.getHTMX(base + "?" + tc.query)
			if h.status != http.StatusUnprocessableEntity || strings.Contains(h.body, "<html") || !strings.Contains(h.body, `field-error-`+tc.field) {
				t.Fatalf("htmx: %d %.300s", h.status, h.body)
			}
			if e := c.get(base + "/export.csv?" + tc.query); e.status != http.StatusUnprocessableEntity || e.header.Get("Content-Disposition") != "" {
				t.Fatalf("export with bad filter: %d %q", e.status, e.header.Get("Content-Disposition"))
			}
		})
	}
	for _, q := range []string{"before=abc", "before=0", "before=-3", "before=i5", "after=x", "before=5&after=3", "before=99999999999999999999"} {
		t.Run(q, func(t *testing.T) {
			for _, get := range []func(string) answer{c.get, c.getHTMX} {
				if a := get(base + "?" + q); a.status != http.StatusBadRequest {
					t.Fatalf("status %d, want 400: %.200s", a.status, a.body)
				}
			}
		})
	}
}

// TestAuditPaginationEveryEventOnce walks the timeline page by page, with
// htmx ("older" in place) and without (links), and sees every event exactly
// once, newest first.
func TestAuditPaginationEveryEventOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.record(melati, nil, systemEvents(130, "report.sent")...)
	c := f.client()
	c.login("budi@melati.test")
	total := f.count(`SELECT count(*) FROM audit_events WHERE tenant_id = $1`, f.tenantID(melati))
	if total < 131 {
		t.Fatalf("only %d events", total)
	}

	walk := func(t *testing.T, htmx bool) []int64 {
		a := c.get("/t/" + melati + "/audit")
		all := ids(a.body)
		if len(all) != 50 {
			t.Fatalf("first page has %d events", len(all))
		}
		for i := 0; i < 10; i++ {
			m := olderHref.FindStringSubmatch(a.body)
			if m == nil {
				return all
			}
			next := strings.ReplaceAll(m[1], "&amp;", "&")
			if htmx {
				a = c.getHTMX(next)
				if strings.Contains(a.body, "<html") || strings.Contains(a.body, "audit-filter") {
					t.Fatalf("older via htmx answered more than rows: %.200s", a.body)
				}
			} else {
				a = c.get(next)
				if !strings.Contains(a.body, `data-testid="audit-newest"`) || strings.Contains(a.body, `id="audit-poll"`) {
					t.Fatal("an older page without JS needs a way back and no poller")
				}
			}
			if a.status != http.StatusOK {
				t.Fatalf("older page: %d", a.status)
			}
			all = append(all, ids(a.body)...)
		}
		t.Fatal("too many pages")
		return nil
	}
	for _, htmx := range []bool{true, false} {
		t.Run(fmt.Sprintf("htmx=%v", htmx), func(t *testing.T) {
			got := walk(t, htmx)
			if len(got) != total {
				t.Fatalf("saw %d events, want %d", len(got), total)
			}
			for i := 1; i < len(got); i++ {
				if got[i] >= got[i-1] {
					t.Fatalf("not every event exactly once, newest first: %d after %d", got[i], got[i-1])
				}
			}
		})
	}
	// A filtered walk keeps the filter on the older link.
	a := c.get("/t/" + melati + "/audit?action=report.sent")
	m := olderHref.FindStringSubmatch(a.body)
	if m == nil || !strings.Contains(m[1], "action=report.sent") {
		t.Fatalf("older link lacks the filter: %v", m)
	}
}

// TestAuditPoll: the live poll answers only newer events (newest first,
// respecting the filter) under a new poller, and 204 when nothing is new.
func TestAuditPoll(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login("budi@melati.test")
	base := "/t/" + melati + "/audit"
	page := c.get(base)
	poll := regexp.MustCompile(`id="audit-poll"[^>]*hx-get="([^"]+)"`)
	m := poll.FindStringSubmatch(page.body)
	if m == nil {
		t.Fatalf("no poller on the first page: %.500s", page.body)
	}
	url1 := strings.ReplaceAll(m[1], "&amp;", "&")
	if a := c.getHTMX(url1); a.status != http.StatusNoContent {
		t.Fatalf("poll with nothing new: %d", a.status)
	}
	recs := f.record(melati, nil, append(systemEvents(2, "report.sent"), audit.Event{ActorKind: audit.ActorSystem, Action: "plan.renewed", Entity: "plan", EntityID: "pro"})...)
	a := c.getHTMX(url1)
	got := ids(a.body)
	if a.status != http.StatusOK || len(got) != 3 || got[0] != recs[2].ID || got[2] != recs[0].ID {
		t.Fatalf("poll: %d ids %v, want the 3 new ones newest first", a.status, got)
	}
	if s := seqs(a.body); s[0] != 0 || !strings.Contains(a.body, `data-testid="audit-unsealed"`) {
		t.Fatalf("events the sealer has not reached show without a seq, marked: %v", s)
	}
	m = poll.FindStringSubmatch(a.body)
	if m == nil || !strings.Contains(m[1], "after="+strconv.FormatInt(recs[2].ID, 10)) {
		t.Fatalf("new poller does not move on: %v", m)
	}
	if again := c.getHTMX(strings.ReplaceAll(m[1], "&amp;", "&")); again.status != http.StatusNoContent {
		t.Fatalf("second poll: %d", again.status)
	}

	// A filtered poll shows only matching events but still advances past
	// the others, so it never rescans them.
	filtered := c.get(base + "?action=plan.renewed")
	m = poll.FindStringSubmatch(filtered.body)
	fURL := strings.ReplaceAll(m[1], "&amp;", "&")
	more := f.record(melati, nil, append(systemEvents(3, "report.sent"), audit.Event{ActorKind: audit.ActorSystem, Action: "plan.renewed", Entity: "plan", EntityID: "pro"})...)
	a = c.getHTMX(fURL)
	if got := actions(a.body); len(got) != 1 || got[0] != "plan.renewed" {
		t.Fatalf("filtered poll: %v", got)
	}
	if !strings.Contains(a.body, "after="+strconv.FormatInt(more[3].ID, 10)) {
		t.Fatal("filtered poll did not advance to the head")
	}
	f.record(melati, nil, systemEvents(2, "report.sent")...)
	m = poll.FindStringSubmatch(a.body)
	a = c.getHTMX(strings.ReplaceAll(m[1], "&amp;", "&"))
	if a.status != http.StatusOK || len(ids(a.body)) != 0 || !strings.Contains(a.body, `id="audit-poll"`) {
		t.Fatalf("filtered poll over non-matching events: %d %v", a.status, ids(a.body))
	}
}

// TestAuditEntityHistory: one entity's story oldest first; an id that
// exists only in another tenant, or nowhere, is a 404 alike.
func TestAuditEntityHistory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	budi := f.userID("budi@melati.test")
	sari := f.userID("sari@senja.test")
	f.record(melati, nil,
		audit.Event{ActorKind: audit.ActorUser, ActorID: &budi, Action: "order.create", Entity: "order", EntityID: "A/1 x"},
		audit.Event{ActorKind: audit.ActorSystem, Action: "order.paid", Entity: "order", EntityID: "A/1 x"},
		audit.Event{ActorKind: audit.ActorSystem, Action: "order.paid", Entity: "order", EntityID: "other"},
	)
	f.record(senja, nil, audit.Event{ActorKind: audit.ActorUser, ActorID: &sari, Action: "order.create", Entity: "order", EntityID: "senja-only",
		Detail: json.RawMessage(`{"menu": "Es Kopi Susu"}`)})

	c := f.client()
	c.login("budi@melati.test")
	timeline := c.get("/t/" + melati + "/audit?entity=order")
	link := `href="/t/toko-bunga-melati/audit/order/A%2F1%20x"`
	if !strings.Contains(timeline.body, link) {
		t.Fatalf("timeline lacks the escaped entity link %s", link)
	}
	a := c.get("/t/" + melati + "/audit/order/A%2F1%20x")
	if a.status != http.StatusOK {
		t.Fatalf("history: %d %.300s", a.status, a.body)
	}
	if got := actions(a.body); strings.Join(got, ",") != "order.create,order.paid" {
		t.Fatalf("history (oldest first, this entity only): %v", got)
	}
	notFound := f.client()
	notFound.login("budi@melati.test")
	for _, path := range []string{
		"/t/" + melati + "/audit/order/senja-only", // exists in kopi-senja only
		"/t/" + melati + "/audit/order/nope",       // exists nowhere
		"/t/" + melati + "/audit/nothing/1",
	} {
		a := notFound.get(path)
		if a.status != http.StatusNotFound || strings.Contains(a.body, "Es Kopi") || strings.Contains(a.body, "senja-only") {
			t.Fatalf("%s: %d, want a 404 that leaks nothing", path, a.status)
		}
	}
	// Sari reading the same URL in her own tenant sees her event.
	sc := f.client()
	sc.login("sari@senja.test")
	if a := sc.get("/t/" + senja + "/audit/order/senja-only"); a.status != http.StatusOK || !strings.Contains(withRecords(t, sc, a.body), "Es Kopi Susu") {
		t.Fatalf("sari's own history: %d", a.status)
	}
}

// TestAuditExport: CSV with its header and spreadsheet formulas escaped,
// JSON Lines that parse, the filter respected, other tenants 404.
func TestAuditExport(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.client()
	c.login("budi@melati.test")
	if a := c.post("/t/"+melati+"/projects", c.withCSRF(url.Values{"name": {`=HYPERLINK("x")`}}), false); a.status != http.StatusSeeOther {
		t.Fatalf("create project: %d %.300s", a.status, a.body)
	}
	f.record(melati, nil, systemEvents(3, "report.sent")...)
	f.seal()

	a := c.get("/t/" + melati + "/audit/export.csv?action=project.create")
	if a.status != http.StatusOK || !strings.HasPrefix(a.header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(a.header.Get("Content-Disposition"), `attachment; filename="toko-bunga-melati-audit.csv"`) {
		t.Fatalf("csv: %d %q %q", a.status, a.header.Get("Content-Type"), a.header.Get("Content-Disposition"))
	}
	records, err := csv.NewReader(strings.NewReader(a.body)).ReadAll()
	if err != nil {
		t.Fatalf("parse csv: %v", err)
	}
	if strings.Join(records[0], ",") != strings.Join(audit.CSVHeader, ",") {
		t.Fatalf("header: %v", records[0])
	}
	records = withoutTrailer(t, records)
	if len(records) != 2 {
		t.Fatalf("filter not respected: %d rows", len(records)-1)
	}
	detail := records[1][9]
	if records[1][6] != "project.create" || !strings.Contains(detail, `=HYPERLINK(\"x\")`) {
		t.Fatalf("row: %v", records[1])
	}
	// The name sits inside the JSON detail; check no cell starts a formula
	// and that a cell which would (the project name as entity data) is
	// escaped by CSVCell.
	for _, cell := range records[1] {
		if strings.HasPrefix(cell, "=") || strings.HasPrefix(cell, "+") || strings.HasPrefix(cell, "@") {
			t.Fatalf("formula cell %q", cell)
		}
	}

	// A formula at the start of a cell (entity id) is escaped.
	f.record(melati, nil, audit.Event{ActorKind: audit.ActorSystem, Action: "import.row", Entity: "row", EntityID: `=HYPERLINK("x")`})
	f.seal()
	a = c.get("/t/" + melati + "/audit/export.csv?action=import.row")
	records, _ = csv.NewReader(strings.NewReader(a.body)).ReadAll()
	records = withoutTrailer(t, records)
	if len(records) != 2 || records[1][8] != `'=HYPERLINK("x")` {
		t.Fatalf("formula cell not escaped: %v", records)
	}

	j := c.get("/t/" + melati + "/audit/export.jsonl?actor=system")
	if j.status != http.StatusOK || !strings.HasPrefix(j.header.Get("Content-Type"), "application/jsonl") ||
		!strings.Contains(j.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("jsonl: %d %q", j.status, j.header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(strings.NewReader(j.body))
	n := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `{"trailer":`) {
			continue
		}
		var line struct {
			Action    string `json:"action"`
			ActorKind string `json:"actor_kind"`
			Seq       int64  `json:"seq"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %d does not parse: %v", n+1, err)
		}
		if line.ActorKind != "system" {
			t.Fatalf("filter not respected: %+v", line)
		}
		n++
	}
	if n != 4 {
		t.Fatalf("%d system lines, want 4", n)
	}

	other := f.client()
	other.login("sari@senja.test")
	for _, p := range []string{"/audit/export.csv", "/audit/export.jsonl"} {
		if a := other.get("/t/" + melati + p); a.status != http.StatusNotFound || a.header.Get("Content-Disposition") != "" || strings.Contains(a.body, "project.create") {
			t.Fatalf("cross-tenant export %s: %d", p, a.status)
		}
	}
}

// TestAuditVerify: "Verify now" re-runs the chain check and shows the
// result, with and without htmx; a tampered chain shows where it broke.
func TestAuditVerify(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	recs := f.record(melati, nil, systemEvents(5, "report.sent")...)
	c := f.client()
	c.login("budi@melati.test") // owners and admins verify (it reads the whole trail)
	before := c.get("/t/" + melati + "/audit")
	if !strings.Contains(before.body, "not verified yet") {
		t.Fatal("chain status before any verification")
	}
	f.seal()
	a := c.post("/t/"+melati+"/audit/verify", c.withCSRF(nil), false)
	if a.status != http.StatusSeeOther || a.location != "/t/"+melati+"/audit" {
		t.Fatalf("verify: %d %q", a.status, a.location)
	}
	head := f.count(`SELECT max(seq) FROM audit_leaves WHERE tenant_id = $1`, f.tenantID(melati))
	page := c.get("/t/" + melati + "/audit")
	if want := fmt.Sprintf("Chain verified through #%d", head); !strings.Contains(page.body, want) {
		t.Fatalf("page lacks %q", want)
	}

	// Tamper with one event as the superuser (the app cannot).
	ctx := context.Background()
	_, err := f.db.Admin.Exec(ctx, `ALTER TABLE audit_sealed DISABLE TRIGGER audit_sealed_no_update`)
	if err == nil {
		_, err = f.db.Admin.Exec(ctx, `UPDATE audit_sealed SET detail = '{"n": 999}' WHERE tenant_id = $1 AND id = $2`, f.tenantID(melati), recs[2].ID)
	}
	if err != nil {
		t.Fatalf("tamper: %v", err)
	}
	tampered := f.count(`SELECT seq FROM audit_leaves WHERE tenant_id = $1 AND event_id = $2`, f.tenantID(melati), recs[2].ID)
	// A result is kept until the tree grows: one more event, then verify.
	f.record(melati, nil, systemEvents(1, "report.sent")...)
	f.seal()
	h := c.post("/t/"+melati+"/audit/verify", c.withCSRF(nil), true)
	if h.status != http.StatusOK || strings.Contains(h.body, "<html") {
		t.Fatalf("htmx verify: %d %.200s", h.status, h.body)
	}
	if want := fmt.Sprintf("Chain broken at #%d", tampered); !strings.Contains(h.body, want) || !strings.Contains(h.body, "altered") {
		t.Fatalf("verify result lacks %q: %.500s", want, h.body)
	}
}

// TestAuditVerifyBusy: while another replica verifies the tenant's chain
// (it holds the verification advisory lock), "Verify now" walks nothing and
// says so: inside the htmx fragment, or as a 409 page without htmx.
func TestAuditVerifyBusy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.record(melati, nil, systemEvents(3, "report.sent")...)
	c := f.client()
	c.login("budi@melati.test")
	ctx := context.Background()
	tx, err := f.db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The key audit.Verifier locks (namespace, hash of the tenant id).
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(727277, hashtext($1::bigint::text))`, f.tenantID(melati)); err != nil {
		t.Fatal(err)
	}
	h := c.post("/t/"+melati+"/audit/verify", c.withCSRF(nil), true)
	if h.status != http.StatusOK || !strings.Contains(h.body, `data-testid="chain-busy"`) || !strings.Contains(h.body, "being verified right now") || strings.Contains(h.body, "Chain verified") {
		t.Fatalf("htmx verify while another replica verifies: %d %.500s", h.status, h.body)
	}
	a := c.post("/t/"+melati+"/audit/verify", c.withCSRF(nil), false)
	if a.status != http.StatusConflict || !strings.Contains(a.body, "being verified right now") {
		t.Fatalf("verify while another replica verifies: %d %.300s", a.status, a.body)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	h = c.post("/t/"+melati+"/audit/verify", c.withCSRF(nil), true)
	if h.status != http.StatusOK || !strings.Contains(h.body, "Chain verified through") || strings.Contains(h.body, "chain-busy") {
		t.Fatalf("htmx verify once the lock is free: %d %.500s", h.status, h.body)
	}
}

// withoutTrailer checks that a CSV export ends with its trailer row
// ("#trailer", count of the rows before it) and returns the rows without it.
func withoutTrailer(t *testing.T, records [][]string) [][]string {
	t.Helper()
	last := records[len(records)-1]
	if len(records) < 2 || last[0] != "#trailer" || last[1] != strconv.Itoa(len(records)-2) {
		t.Fatalf("CSV export does not end with its trailer: %v", last)
	}
	return records[:len(records)-1]
}
