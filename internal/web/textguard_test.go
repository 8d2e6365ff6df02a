package web_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
)

const rlo = "\u202E" // right-to-left override

// Names with direction overrides or control characters are refused; free
// text that holds them (a job's error, an operator's reason, an audit
// event's fields) is shown with the characters made visible, on every page
// and in CSV cells, which also never start a formula.
func TestDeceptiveTextRefusedInNamesAndVisibleElsewhere(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	owner := f.client()
	owner.login("budi@melati.test")
	before := f.count(`SELECT count(*) FROM projects`)
	for _, name := range []string{"Katalog " + rlo + "txt.exe", "Bell\a", "Iso\u2066late"} {
		a := owner.post("/t/toko-bunga-melati/projects", owner.withCSRF(url.Values{"name": {name}}), true)
		if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `data-testid="field-error"`) {
			t.Fatalf("name %q: %d %.300s", name, a.status, a.body)
		}
	}
	if n := f.count(`SELECT count(*) FROM projects`); n != before {
		t.Fatal("a deceptive name was stored")
	}

	// Free text: a job error and an operator's reason.
	id := f.makeDead("toko-bunga-melati", "email.weekly-report", 1, "smtp "+rlo+"055 relay\x1b[31m")[0]
	staff := f.client()
	staff.login("support@jejak.test")
	reason := "fixed " + rlo + "21-SPO"
	if a := staff.post(fmt.Sprintf("/admin/jobs/%d/retry", id), staff.withCSRF(url.Values{"reason": {reason}, "confirm": {"permanent"}}), false); a.status != http.StatusSeeOther {
		t.Fatalf("retry: %d %.300s", a.status, a.body)
	}
	// An event whose fields would spoof a spreadsheet.
	melati := f.tenantID("toko-bunga-melati")
	err := database.InTenantTx(context.Background(), f.db.App, melati, func(tx pgx.Tx) error {
		_, err := audit.NewRecorder(nil).Record(context.Background(), tx, audit.Event{TenantID: melati, ActorKind: audit.ActorSystem,
			Action: "import.row", Entity: "=HYPERLINK(\"http://evil.test\")", EntityID: "@SUM(A1)" + rlo, Detail: json.RawMessage(`{"note":"x` + rlo + `y"}`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	pages := []struct {
		c    *client
		path string
	}{
		{staff, fmt.Sprintf("/admin/jobs/%d", id)},
		{staff, "/admin/jobs"},
		{owner, "/t/toko-bunga-melati/audit"},
		{owner, "/t/toko-bunga-melati/jobs"},
	}
	for _, p := range pages {
		a := p.c.get(p.path)
		if a.status != http.StatusOK {
			t.Fatalf("%s: %d", p.path, a.status)
		}
		if strings.Contains(a.body, rlo) || strings.Contains(a.body, "\x1b") {
			t.Errorf("%s shows a raw direction override or escape", p.path)
		}
		if !strings.Contains(a.body, "⟨U+202E⟩") {
			t.Errorf("%s does not show the override visibly", p.path)
		}
	}
	f.seal() // the export holds the sealed log
	a := owner.get("/t/toko-bunga-melati/audit/export.csv")
	if a.status != http.StatusOK {
		t.Fatalf("export: %d", a.status)
	}
	records, err := csv.NewReader(strings.NewReader(a.body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range records {
		if r[6] != "import.row" {
			continue
		}
		found = true
		if r[7] != `'=HYPERLINK("http://evil.test")` || r[8] != "'@SUM(A1)⟨U+202E⟩" {
			t.Fatalf("CSV cells not neutralised: entity=%q entity_id=%q", r[7], r[8])
		}
		if r[9] != `{"note": "x`+rlo+`y"}` {
			t.Fatalf("detail must stay as hashed: %q", r[9])
		}
	}
	if !found {
		t.Fatal("event missing from the export")
	}
}

// A handler panic's stack is stored for staff; the tenant's members see a
// short error only.
func TestTenantSeesShortJobErrorStaffSeesStack(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, -1)
	id := f.makeDead("toko-bunga-melati", "email.weekly-report", 1,
		"handler panic: runtime error: invalid memory address\ngoroutine 42 [running]:\ngithub.com/jejakhq/jejak/internal/kinds.secret(0xc000)\n\t/src/internal/kinds/kinds.go:99")[0]
	for _, email := range []string{"budi@melati.test", "rina@melati.test"} {
		c := f.client()
		c.login(email)
		a := c.get("/t/toko-bunga-melati/jobs?state=dead")
		if a.status != http.StatusOK || !strings.Contains(a.body, fmt.Sprint(id)) {
			t.Fatalf("%s: jobs page %d", email, a.status)
		}
		for _, leak := range []string{"goroutine", "kinds.go", "invalid memory address", "/src/"} {
			if strings.Contains(a.body, leak) {
				t.Fatalf("%s sees %q on the jobs page", email, leak)
			}
		}
		if !strings.Contains(a.body, "handler crashed") {
			t.Fatalf("%s does not see the short error", email)
		}
	}
	staff := f.client()
	staff.login("support@jejak.test")
	if a := staff.get(fmt.Sprintf("/admin/jobs/%d", id)); !strings.Contains(a.body, "goroutine 42") || !strings.Contains(a.body, "kinds.go:99") {
		t.Fatalf("staff job page lacks the stack: %d", a.status)
	}
}
