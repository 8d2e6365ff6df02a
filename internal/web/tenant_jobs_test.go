package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
)

// enqueueMany writes n jobs of kind for slug's tenant in one tenant transaction.
func (f *fixture) enqueueMany(slug, kind string, n int) []int64 {
	f.t.Helper()
	ctx := context.Background()
	tid := f.tenantID(slug)
	ps := make([]job.EnqueueParams, n)
	for i := range ps {
		ps[i] = job.EnqueueParams{TenantID: tid, Kind: kind, Payload: json.RawMessage(fmt.Sprintf(`{"tenant_id": %d}`, tid))}
	}
	var ids []int64
	err := database.InTenantTx(ctx, f.db.App, tid, func(tx pgx.Tx) (err error) {
		ids, err = f.jobs.EnqueueMany(ctx, tx, ps)
		return err
	})
	if err != nil {
		f.t.Fatalf("enqueue in %s: %v", slug, err)
	}
	return ids
}

var jobRow = regexp.MustCompile(`data-testid="job" data-job-id="(\d+)" data-state="([a-z]+)"`)

func jobIDs(body string) []int64 {
	var out []int64
	for _, m := range jobRow.FindAllStringSubmatch(body, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		out = append(out, n)
	}
	return out
}

// TestTenantJobsPage: the owner and a member see their tenant's jobs with
// state, attempts and last error, filtered by state; never another
// tenant's; bad state and cursor answer 4xx.
func TestTenantJobsPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	mine := f.enqueueMany(melati, "email.weekly-report", 3)
	theirs := f.enqueueMany(senja, "email.weekly-report", 2)
	claimed, err := f.jobs.Claim(ctx, "test-worker", 10)
	if err != nil || len(claimed) != 5 {
		t.Fatalf("claim: %d %v", len(claimed), err)
	}
	fail := func(id int64, msg string) {
		if _, err := f.jobs.Fail(ctx, "test-worker", id, job.Permanent(errors.New(msg))); err != nil {
			t.Fatalf("fail %d: %v", id, err)
		}
	}
	fail(mine[0], "smtp 550 mailbox unavailable")
	fail(theirs[0], "senja-secret-error")
	if err := f.jobs.Complete(ctx, "test-worker", mine[1]); err != nil {
		t.Fatalf("complete: %v", err)
	}
	// mine[2] stays running.

	for _, email := range []string{"budi@melati.test", "rina@melati.test"} {
		t.Run(email, func(t *testing.T) {
			c := f.client()
			c.login(email)
			a := c.get("/t/" + melati + "/jobs")
			if a.status != http.StatusOK {
				t.Fatalf("jobs: %d", a.status)
			}
			got := jobIDs(a.body)
			if fmt.Sprint(got) != fmt.Sprint([]int64{mine[2], mine[1], mine[0]}) {
				t.Fatalf("jobs %v, want own jobs newest first %v", got, mine)
			}
			for _, leak := range []string{"senja-secret-error", fmt.Sprintf(`data-job-id="%d"`, theirs[0]), fmt.Sprintf(`data-job-id="%d"`, theirs[1])} {
				if strings.Contains(a.body, leak) {
					t.Fatalf("another tenant's job shows: %q", leak)
				}
			}
			for _, want := range []string{"smtp 550 mailbox unavailable", "1/3", "email.weekly-report", `class="badge dead"`, "WIB"} {
				if !strings.Contains(a.body, want) {
					t.Errorf("page lacks %q", want)
				}
			}
			for state, want := range map[string][]int64{"dead": {mine[0]}, "succeeded": {mine[1]}, "running": {mine[2]}, "pending": nil, "cancelled": nil} {
				a := c.get("/t/" + melati + "/jobs?state=" + state)
				if a.status != http.StatusOK || fmt.Sprint(jobIDs(a.body)) != fmt.Sprint(want) {
					t.Fatalf("state=%s: %d %v, want %v", state, a.status, jobIDs(a.body), want)
				}
				if !strings.Contains(a.body, `href="/t/toko-bunga-melati/jobs?state=`+state+`" aria-current="page"`) {
					t.Fatalf("state=%s tab not marked current", state)
				}
			}
		})
	}

	c := f.client()
	c.login("budi@melati.test")
	if a := c.get("/t/" + melati + "/jobs?state=exploded"); a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `data-testid="field-error-state"`) {
		t.Fatalf("bad state: %d", a.status)
	}
	for _, q := range []string{"before=x", "before=-1", "before=0"} {
		if a := c.get("/t/" + melati + "/jobs?" + q); a.status != http.StatusBadRequest {
			t.Fatalf("%s: %d", q, a.status)
		}
	}
	other := f.client()
	other.login("sari@senja.test")
	if a := other.get("/t/" + melati + "/jobs"); a.status != http.StatusNotFound || strings.Contains(a.body, "smtp 550") {
		t.Fatalf("cross-tenant jobs: %d", a.status)
	}
	if a := other.get("/t/" + senja + "/jobs"); fmt.Sprint(jobIDs(a.body)) != fmt.Sprint([]int64{theirs[1], theirs[0]}) {
		t.Fatalf("sari's jobs: %v", jobIDs(a.body))
	}
}

// TestTenantJobsPagination: keyset pages cover every job exactly once and
// keep the state filter.
func TestTenantJobsPagination(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ids := f.enqueueMany(melati, "email.weekly-report", 120)
	f.enqueueMany(senja, "email.weekly-report", 5)
	c := f.client()
	c.login("budi@melati.test")
	older := regexp.MustCompile(`href="([^"]*before=[^"]*)" data-testid="jobs-older"`)
	a := c.get("/t/" + melati + "/jobs?state=pending")
	var all []int64
	for pages := 0; ; pages++ {
		if a.status != http.StatusOK || pages > 5 {
			t.Fatalf("page %d: %d", pages, a.status)
		}
		all = append(all, jobIDs(a.body)...)
		m := older.FindStringSubmatch(a.body)
		if m == nil {
			break
		}
		next := strings.ReplaceAll(m[1], "&amp;", "&")
		if !strings.Contains(next, "state=pending") {
			t.Fatalf("older link drops the state: %s", next)
		}
		a = c.get(next)
	}
	if len(all) != len(ids) {
		t.Fatalf("saw %d jobs, want %d", len(all), len(ids))
	}
	for i, id := range all {
		if id != ids[len(ids)-1-i] {
			t.Fatalf("job %d is %d, want %d (each once, newest first)", i, id, ids[len(ids)-1-i])
		}
	}
}

var tabCount = regexp.MustCompile(`href="[^"]*"[^>]*>\s*([A-Za-z]+)\s*<span class="tab-count" data-testid="tab-count">([^<]*)</span>`)

// tabCounts reads the state tabs' counts by tab label.
func tabCounts(body string) map[string]string {
	out := map[string]string{}
	for _, m := range tabCount.FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestTenantJobsKindFilterAndCounts: the kind filter narrows the list and
// the tabs' counts, keeps the state, and refuses a kind no job can have
// (422, nothing listed); the counts agree with the database and stop at
// 1,000 ("1,000+").
func TestTenantJobsKindFilterAndCounts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a := f.enqueueMany(melati, "test.kind-a", 4)
	f.enqueueMany(melati, "test.kind-b", 2)
	f.enqueueMany(senja, "test.kind-a", 3)
	held, err := f.jobs.Claim(ctx, "test-worker", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range held {
		var err error
		switch j.ID {
		case a[0]:
			_, err = f.jobs.Fail(ctx, "test-worker", j.ID, job.Permanent(errors.New("bad address")))
		case a[1]:
			err = f.jobs.Complete(ctx, "test-worker", j.ID)
		case a[2]:
			// stays running
		default:
			_, err = f.jobs.Fail(ctx, "test-worker", j.ID, errors.New("put back"))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	c := f.client()
	c.login("rina@melati.test")

	page := c.get("/t/" + melati + "/jobs?kind=test.kind-a")
	if page.status != http.StatusOK || fmt.Sprint(jobIDs(page.body)) != fmt.Sprint([]int64{a[3], a[2], a[1], a[0]}) {
		t.Fatalf("kind filter: %d %v, want %v", page.status, jobIDs(page.body), a)
	}
	want := map[string]string{"All": "4", "Pending": "1", "Running": "1", "Succeeded": "1", "Dead": "1", "Cancelled": "0"}
	if got := tabCounts(page.body); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("kind-a counts %v, want %v", got, want)
	}
	if !strings.Contains(page.body, `href="/t/toko-bunga-melati/jobs?kind=test.kind-a&amp;state=dead"`) {
		t.Fatal("the state tabs drop the kind filter")
	}
	dead := c.get("/t/" + melati + "/jobs?kind=test.kind-a&state=dead")
	if fmt.Sprint(jobIDs(dead.body)) != fmt.Sprint([]int64{a[0]}) {
		t.Fatalf("kind and state: %v", jobIDs(dead.body))
	}
	if got := jobIDs(c.get("/t/" + melati + "/jobs?kind=test.nothing").body); len(got) != 0 {
		t.Fatalf("unknown kind lists %v", got)
	}

	// Unfiltered counts are the database's, per state.
	all := c.get("/t/" + melati + "/jobs")
	counts := tabCounts(all.body)
	tid := f.tenantID(melati)
	total := 0
	for _, st := range job.States {
		n := f.count(`SELECT count(*) FROM jobs WHERE tenant_id = $1 AND state = $2`, tid, string(st))
		total += n
		label := strings.ToUpper(string(st[:1])) + string(st[1:])
		if counts[label] != strconv.Itoa(n) {
			t.Fatalf("%s tab shows %q, database has %d (%v)", label, counts[label], n, counts)
		}
	}
	if counts["All"] != strconv.Itoa(total) {
		t.Fatalf("All tab shows %q, database has %d", counts["All"], total)
	}

	// A refused kind: 422 by the field, no list, no counts.
	for _, bad := range []string{strings.Repeat("k", job.MaxKindLen+1)} {
		r := c.get("/t/" + melati + "/jobs?kind=" + bad)
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, `data-testid="field-error-kind"`) ||
			!strings.Contains(r.body, "A kind is at most 100 characters.") || len(jobIDs(r.body)) != 0 || len(tabCounts(r.body)) != 0 {
			t.Fatalf("bad kind: %d %.2000s", r.status, r.body)
		}
	}

	// Past 1,000 a count says so instead of counting on.
	f.enqueueMany(senja, "test.many", 1001)
	owner := f.client()
	owner.login("sari@senja.test")
	for _, q := range []string{"", "?kind=test.many"} {
		got := tabCounts(owner.get("/t/" + senja + "/jobs" + q).body)
		if got["Pending"] != "1,000+" || got["All"] != "1,000+" {
			t.Fatalf("senja%s counts %v, want 1,000+", q, got)
		}
	}
}
