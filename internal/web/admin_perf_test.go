package web_test

import (
	"strings"
	"testing"
)

// TestStaffOverviewPollStatements: the overview's htmx poll, which every
// staff viewer sends every few seconds, reads the firing alerts in one
// statement without a transaction of its own, and its figures from the
// snapshot the viewers share; the whole page reads the sealing backlog
// in one statement too.
func TestStaffOverviewPollStatements(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c, _, sys := tracedClient(t, f)
	c.login("admin@jejak.test")
	if r := c.getHTMX("/admin?partial=overview"); r.status != 200 { // fills the shared snapshot
		t.Fatalf("first poll: %d", r.status)
	}
	sys.take("")
	if r := c.getHTMX("/admin?partial=overview"); r.status != 200 || !strings.Contains(r.body, `data-testid="count-running"`) {
		t.Fatalf("poll: %d", r.status)
	}
	var alerts int
	for _, s := range sys.take("") {
		switch {
		case strings.Contains(s, "name: AlertStateList"):
			alerts++
		case strings.Contains(s, "name: AlertEventsRecent"), strings.HasPrefix(strings.ToLower(strings.TrimSpace(s)), "begin"):
			t.Fatalf("the poll ran %q", s)
		}
	}
	if alerts != 1 {
		t.Fatalf("the poll read the alert states %d times, want once", alerts)
	}
	if r := c.get("/admin"); r.status != 200 {
		t.Fatalf("page: %d", r.status)
	}
	var backlog int
	for _, s := range sys.take("") {
		switch {
		case strings.Contains(s, "name: AuditUnsealedStats"):
			backlog++
		case strings.HasPrefix(strings.ToLower(strings.TrimSpace(s)), "begin"):
			t.Fatalf("the page began a transaction: %q", s)
		}
	}
	if backlog != 1 {
		t.Fatalf("the page read the sealing backlog %d times, want once", backlog)
	}
}
