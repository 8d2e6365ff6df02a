package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var staffStamp = regexp.MustCompile(`\d{1,2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} (UTC|WIB)`)

// TestStaffPagesFollowTheStaffMembersZone: staff pages print times in UTC
// until a staff member chooses a zone; then in that zone (the same moment,
// seven hours on for Jakarta), for them only. A zone that is not one
// changes nothing.
func TestStaffPagesFollowTheStaffMembersZone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dead := f.makeDead("toko-bunga-melati", "email.weekly-report", 1, "smtp 550")[0]
	support, admin := f.client(), f.client()
	support.login("support@jejak.test")
	admin.login("admin@jejak.test")
	page := fmt.Sprintf("/admin/jobs/%d", dead)

	before := support.get(page)
	stamps := staffStamp.FindAllString(before.body, -1)
	if before.status != http.StatusOK || len(stamps) == 0 || strings.Contains(before.body, " WIB") {
		t.Fatalf("before choosing: %d, stamps %v", before.status, stamps)
	}
	if !strings.Contains(before.body, `data-testid="staff-zone"`) {
		t.Fatalf("the page offers no zone choice")
	}
	bad := support.post("/admin/timezone", support.withCSRF(url.Values{"time_zone": {"Mars/Olympus_Mons"}}), false)
	if bad.status != http.StatusUnprocessableEntity {
		t.Fatalf("a zone that is not one: %d", bad.status)
	}
	if n := f.count(`SELECT count(*) FROM users WHERE time_zone IS NOT NULL`); n != 0 {
		t.Fatalf("a bad zone was saved (%d users with a zone)", n)
	}
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/admin/timezone",
		strings.NewReader(support.withCSRF(url.Values{"time_zone": {"Asia/Jakarta"}}).Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Referer", f.srv.URL+page)
	if a := support.do(req); a.status != http.StatusSeeOther || a.location != page {
		t.Fatalf("choose Jakarta: %d → %q", a.status, a.location)
	}
	after := support.get(page)
	if !strings.Contains(after.body, " WIB") || strings.Contains(after.body, stamps[0]) {
		t.Fatalf("after choosing Jakarta the page still reads %q (WIB shown: %v)", stamps[0], strings.Contains(after.body, " WIB"))
	}
	if !strings.Contains(after.body, `<option value="Asia/Jakarta" selected>`) {
		t.Errorf("the chooser does not show the saved zone")
	}
	if other := admin.get(page); strings.Contains(other.body, " WIB") {
		t.Errorf("another staff member's page changed zone too")
	}
}

// TestTenantTimesCarryTheTenantsZone: webhook times on a tenant page are
// in the tenant's zone and say so.
func TestTenantTimesCarryTheTenantsZone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hook, _ := f.webhookWithDelivery("toko-bunga-melati")
	owner := f.client()
	owner.login("budi@melati.test")
	for _, p := range []string{"/t/toko-bunga-melati/webhooks", fmt.Sprintf("/t/toko-bunga-melati/webhooks/%d", hook)} {
		a := owner.get(p)
		if a.status != http.StatusOK || !regexp.MustCompile(`\d{2}:\d{2}:\d{2} WIB`).MatchString(a.body) {
			t.Errorf("%s: %d, no time in WIB", p, a.status)
		}
	}
}
