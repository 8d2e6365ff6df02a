package web_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/clock"
)

// TestIncidentShowsApprovals: a two-person request and its approval carry
// the request's trace; the incident page of that trace lists the request,
// then the decision (naming the job it enqueued), each linking to the
// approvals page, in time order, and before the job the approval enqueued.
func TestIncidentShowsApprovals(t *testing.T) {
	t.Parallel()
	f := newSensitiveFixture(t, clock.Database{})
	sup, adm := f.client(), f.client()
	sup.login("support@jejak.test")
	adm.login("admin@jejak.test")
	id, jobID := requestAndApprove(t, f, sup, adm, "compromised laptop")
	var trace string
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT trace_id FROM approvals WHERE id = $1`, id).Scan(&trace); err != nil {
		t.Fatal(err)
	}
	page := sup.get("/admin/search?trace=" + trace)
	if page.status != http.StatusOK {
		t.Fatalf("incident page: %d", page.status)
	}
	requested := strings.Index(page.body, "user.disable-access approval requested")
	approved := strings.Index(page.body, "user.disable-access approved")
	if requested < 0 || approved < 0 || approved < requested {
		t.Fatalf("approval entries missing or out of order (requested at %d, approved at %d): %.3000s", requested, approved, page.body)
	}
	for _, want := range []string{`data-kind="approval"`, `href="/admin/approvals"`, "compromised laptop",
		"enqueued job " + strconv.FormatInt(jobID, 10)} {
		if !strings.Contains(page.body, want) {
			t.Errorf("incident page lacks %q", want)
		}
	}
}
