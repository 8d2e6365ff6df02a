package web_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/app"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/web"
)

// TestAuditTimelineQueryBudget: the first page and an older page each read
// the trail with one keyset query that also names the actors (no second
// query for names); the live poll reads one primary-key probe when nothing
// is new. No OFFSET, no COUNT, no per-row queries.
func TestAuditTimelineQueryBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	budi := f.userID("budi@melati.test")
	rina := f.userID("rina@melati.test")
	events := systemEvents(120, "report.sent")
	for i := range events {
		// Many rows by several people: names must still be one query.
		events[i].ActorKind, events[i].ActorID = "user", &budi
		if i%2 == 0 {
			events[i].ActorID = &rina
		}
	}
	f.record(melati, nil, events...)

	c, log, sysLog := tracedClient(t, f)
	c.login("budi@melati.test")

	// The viewer comes with the session's own lookup: a signed-in page
	// never reads its user by id as well.
	const auditSQL, namesSQL, viewerSQL = `FROM audit_events`, `FROM users WHERE id = ANY`, `name: UserGetByID`
	// check returns how many round trips the audit statements took.
	check := func(name string, a answer, wantAudit, wantNames int) (auditTrips int) {
		t.Helper()
		if a.status >= 400 {
			t.Fatalf("%s: status %d", name, a.status)
		}
		got, trips := log.TakeTrips(auditSQL + `|` + namesSQL + `|` + viewerSQL)
		var audits, names int
		tripsSeen := map[int]bool{}
		for i, s := range got {
			if strings.Contains(s, viewerSQL) {
				t.Fatalf("%s read the signed-in user separately from the session", name)
			}
			upper := strings.ToUpper(s)
			if strings.Contains(upper, "OFFSET") || strings.Contains(upper, "COUNT(") {
				t.Fatalf("%s runs %q", name, s)
			}
			if strings.Contains(s, namesSQL) {
				names++
			} else {
				audits++
				tripsSeen[trips[i]] = true
			}
		}
		if audits != wantAudit || names != wantNames {
			t.Fatalf("%s: %d audit and %d name queries, want %d and %d:\n%s", name, audits, names, wantAudit, wantNames, strings.Join(got, "\n---\n"))
		}
		return len(tripsSeen)
	}
	log.Take("")
	sysLog.Take("")
	first := c.get("/t/" + melati + "/audit")
	check("first page", first, 1, 0)
	// Session, viewer, tenant and membership: one statement, not a
	// session lookup and then the tenant gate.
	var gate, sessions int
	for _, s := range sysLog.Take(`name: (TenantMemberBySlug|SessionFindWithMember)`) {
		if strings.Contains(s, "TenantMemberBySlug") {
			gate++
		} else {
			sessions++
		}
	}
	if gate != 0 || sessions != 1 {
		t.Fatalf("first page read the tenant gate %d times on its own and %d times with the session, want 0 and 1", gate, sessions)
	}
	if got := log.Take(`FROM sessions`); len(got) != 0 {
		t.Fatalf("first page read its session on the tenant pool as well: %q", got)
	}
	for _, name := range []string{"Budi Santoso", "Rina"} {
		if !strings.Contains(first.body, name) {
			t.Fatalf("first page does not name %s", name)
		}
	}
	m := olderHref.FindStringSubmatch(first.body)
	if m == nil {
		t.Fatal("no older link")
	}
	check("older page", c.getHTMX(strings.ReplaceAll(m[1], "&amp;", "&")), 1, 0)
	poll := regexp.MustCompile(`id="audit-poll"[^>]*hx-get="([^"]+)"`).FindStringSubmatch(first.body)
	pollURL := strings.ReplaceAll(poll[1], "&amp;", "&")
	check("idle poll", c.getHTMX(pollURL), 1, 0)
	news := systemEvents(1, "report.sent")
	news[0].ActorKind, news[0].ActorID = "user", &rina
	f.record(melati, nil, news...)
	check("poll with news", c.getHTMX(pollURL), 2, 0)

	// A filtered first page adds one head probe so its poll starts at the
	// head, not at the (possibly much older) newest match.
	filtered := c.get("/t/" + melati + "/audit?action=report.sent&actor=system")
	if trips := check("filtered first page", filtered, 2, 0); trips != 1 {
		t.Fatalf("the filtered first page read its head and its page in %d round trips, want 1", trips)
	}
	poll = regexp.MustCompile(`id="audit-poll"[^>]*hx-get="([^"]+)"`).FindStringSubmatch(filtered.body)
	head := f.count(`SELECT max(id) FROM audit_events WHERE tenant_id = $1`, f.tenantID(melati))
	if !strings.HasSuffix(poll[1], "after="+strconv.Itoa(head)) {
		t.Fatalf("filtered poll starts at %s, want the head %d", poll[1], head)
	}
	check("idle filtered poll", c.getHTMX(strings.ReplaceAll(poll[1], "&amp;", "&")), 1, 0)
}

// tracedClient is a client of a server over f's database whose tenant and
// system pools record every statement they run.
func tracedClient(t *testing.T, f *fixture) (c *client, tenantLog, systemLog *testdb.StatementLog) {
	t.Helper()
	tenantLog, systemLog = &testdb.StatementLog{}, &testdb.StatementLog{}
	cfg, err := pgxpool.ParseConfig(f.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = tenantLog
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET ROLE jejak_app")
		return err
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// The system pool traced too: the tenant gate is read there.
	sys := systemLog.Pool(t, f.db.System)
	srv := httptest.NewServer(web.New(app.NewDeps(pool, sys, f.jobs, clock.Database{}, quietLog())))
	t.Cleanup(srv.Close)
	traced := &fixture{t: t, db: f.db, srv: srv, jobs: f.jobs}
	return traced.client(), tenantLog, systemLog
}

// TestHomeChartsOnlyOnTheWholePage: the owner's home reads its 30 days of
// figures for the whole page (also when a refused form sends it back), and
// not for the htmx answers that swap in the projects section or the plan
// panel, which show no chart.
func TestHomeChartsOnlyOnTheWholePage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c, log, _ := tracedClient(t, f)
	c.login("budi@melati.test")
	const charts = `name: (AuditDayCountList|JobStatsDayList)`
	home := "/t/" + melati + "/"
	// The token is read once: reading it loads a page.
	token := c.csrf()
	send := func(name string, htmx bool) answer {
		return c.post(home+"projects", url.Values{"name": {name}, "_csrf": {token}}, htmx)
	}
	log.Take("")
	for _, tc := range []struct {
		name   string
		send   func() answer
		status int
		charts int
	}{
		{"the home page", func() answer { return c.get(home) }, 200, 2},
		{"a project created with htmx", func() answer { return send("Katalog Hujan", true) }, 200, 0},
		{"a refused project with htmx", func() answer { return send(" ", true) }, 422, 0},
		{"a refused project without htmx", func() answer { return send(" ", false) }, 422, 2},
	} {
		a := tc.send()
		if a.status != tc.status {
			t.Fatalf("%s: status %d, want %d", tc.name, a.status, tc.status)
		}
		if got := log.Take(charts); len(got) != tc.charts {
			t.Fatalf("%s read the charts' figures %d times, want %d", tc.name, len(got), tc.charts)
		}
		if shown := strings.Contains(a.body, `id="activity-chart"`); shown != (tc.charts > 0) {
			t.Fatalf("%s: chart shown = %v", tc.name, shown)
		}
	}
}
