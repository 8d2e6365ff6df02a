package web_test

import (
	"strings"
	"testing"
)

// TestStaffOverviewPollStatements: the overview's htmx poll, which every
// staff viewer sends every few seconds, reads the firing alerts in one
// statement without a transaction of its own, and its figures from the
// snapshot the viewers share; the whole page reads the alerts, the
// sealing backlog, the schedules and the pauses with their log in one
// round trip.
func TestStaffOverviewPollStatements(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c, _, sys := tracedClient(t, f)
	c.login("admin@jejak.test")
	if r := c.getHTMX("/admin?partial=overview"); r.status != 200 { // fills the shared snapshot
		t.Fatalf("first poll: %d", r.status)
	}
	sys.Take("")
	// once fails t if stmts begin a transaction, or name other than once,
	// or any of banned.
	once := func(what string, stmts []string, name string, banned ...string) {
		t.Helper()
		n := 0
		for _, s := range stmts {
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(s)), "begin") {
				t.Fatalf("%s began a transaction: %q", what, s)
			}
			for _, b := range banned {
				if strings.Contains(s, "name: "+b+" ") {
					t.Fatalf("%s ran %s", what, b)
				}
			}
			if strings.Contains(s, "name: "+name+" ") {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%s ran %s %d times, want once", what, name, n)
		}
	}
	if r := c.getHTMX("/admin?partial=overview"); r.status != 200 || !strings.Contains(r.body, `data-testid="count-running"`) {
		t.Fatalf("poll: %d", r.status)
	}
	once("the poll", sys.Take(""), "AlertStateList", "AlertEventsRecent")
	if r := c.get("/admin"); r.status != 200 {
		t.Fatalf("page: %d", r.status)
	}
	// The whole page's other sections are one statement each, sent
	// together: one round trip.
	stmts, trips := sys.TakeTrips("")
	once("the page", stmts, "AuditUnsealedStats")
	page := map[string]int{}
	for i, st := range stmts {
		for _, name := range []string{"AlertStateList", "AuditUnsealedStats", "ScheduleRunLatest", "PauseList", "PauseLogRecent"} {
			if strings.Contains(st, "name: "+name+" ") {
				page[name] = trips[i]
			}
		}
	}
	for _, name := range []string{"AlertStateList", "AuditUnsealedStats", "PauseList", "PauseLogRecent"} {
		if _, ok := page[name]; !ok { // the fixture wires no schedules
			t.Fatalf("the page did not read %s: %v", name, page)
		}
	}
	for name, trip := range page {
		if trip != page["AuditUnsealedStats"] {
			t.Errorf("the page's sections went in more than one round trip: %v (%s)", page, name)
		}
	}
}

// TestStaffJobListReadsNamesAndPageTogether: the staff job list without a
// tenant filter reads the tenants' names and its page in one pipeline;
// with a tenant filter the names come first (the filter needs the tenant's
// id), and both pages list the same newest job.
func TestStaffJobListReadsNamesAndPageTogether(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c, _, sys := tracedClient(t, f)
	c.login("admin@jejak.test")
	const reads = `name: (TenantListNames|JobAdminList\w*) `
	for _, tc := range []struct {
		path     string
		together bool
	}{
		{"/admin/jobs", true},
		{"/admin/jobs?state=pending", true},
		{"/admin/jobs?tenant=toko-bunga-melati", false},
	} {
		sys.Take("")
		if r := c.get(tc.path); r.status != 200 {
			t.Fatalf("%s: status %d", tc.path, r.status)
		}
		stmts, trips := sys.TakeTrips(reads)
		if len(stmts) != 2 {
			t.Fatalf("%s ran %d of the names and the list, want 2:\n%s", tc.path, len(stmts), strings.Join(stmts, "\n---\n"))
		}
		if together := trips[0] == trips[1]; together != tc.together {
			t.Errorf("%s: names and page in one round trip = %v, want %v", tc.path, together, tc.together)
		}
	}
}
