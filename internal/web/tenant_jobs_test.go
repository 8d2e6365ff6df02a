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
