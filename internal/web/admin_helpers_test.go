package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
)

// enqueue adds one job for a tenant through the tenant pool, as
// application code does; payload gets the tenant id when it has none.
func (f *fixture) enqueue(slug string, p job.EnqueueParams) int64 {
	f.t.Helper()
	ctx := context.Background()
	p.TenantID = f.tenantID(slug)
	if p.Kind == "" {
		p.Kind = "email.weekly-report"
	}
	if p.Payload == nil {
		p.Payload = json.RawMessage(fmt.Sprintf(`{"tenant_id": %d}`, p.TenantID))
	}
	var id int64
	err := database.InTenantTx(ctx, f.db.App, p.TenantID, func(tx pgx.Tx) error {
		e, err := f.jobs.Enqueue(ctx, tx, p)
		id = e.ID
		return err
	})
	if err != nil {
		f.t.Fatalf("enqueue: %v", err)
	}
	return id
}

// claimAll claims every due job as worker.
func (f *fixture) claimAll(worker string) []*job.Job {
	f.t.Helper()
	js, err := f.jobs.Claim(context.Background(), worker, 1000)
	if err != nil {
		f.t.Fatalf("claim: %v", err)
	}
	return js
}

// fail fails a held job (the failure counts itself in the stats rollup).
func (f *fixture) fail(worker string, j *job.Job, cause error) job.State {
	f.t.Helper()
	ctx := context.Background()
	st, err := f.jobs.Fail(ctx, worker, j.ID, cause)
	if err != nil {
		f.t.Fatalf("fail job %d: %v", j.ID, err)
	}
	return st
}

// complete completes a held job (the completion counts itself in the
// stats rollup).
func (f *fixture) complete(worker string, j *job.Job) {
	f.t.Helper()
	ctx := context.Background()
	if err := f.jobs.Complete(ctx, worker, j.ID); err != nil {
		f.t.Fatalf("complete job %d: %v", j.ID, err)
	}
}

// makeDead enqueues n jobs of kind for slug and fails each permanently
// with msg; it returns their ids.
func (f *fixture) makeDead(slug, kind string, n int, msg string) []int64 {
	f.t.Helper()
	want := map[int64]bool{}
	var ids []int64
	for i := 0; i < n; i++ {
		id := f.enqueue(slug, job.EnqueueParams{Kind: kind})
		want[id] = true
		ids = append(ids, id)
	}
	for _, j := range f.claimAll("test-worker") {
		if want[j.ID] {
			f.fail("test-worker", j, job.Permanent(errors.New(msg)))
		} else if _, err := f.jobs.Fail(context.Background(), "test-worker", j.ID, errors.New("released by test")); err != nil {
			f.t.Fatalf("put back job %d: %v", j.ID, err)
		}
	}
	return ids
}

func (f *fixture) jobState(id int64) string {
	f.t.Helper()
	var st string
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT state FROM jobs WHERE id = $1`, id).Scan(&st); err != nil {
		f.t.Fatalf("state of job %d: %v", id, err)
	}
	return st
}

// trail returns a tenant's audit events with action, newest first, read
// the way the tenant timeline reads them.
func (f *fixture) trail(slug, action string) []audit.Recorded {
	f.t.Helper()
	tid := f.tenantID(slug)
	var out []audit.Recorded
	err := database.InTenantTx(context.Background(), f.db.App, tid, func(tx pgx.Tx) error {
		p, err := audit.Timeline(context.Background(), tx, tid, audit.Filter{Action: action}, 0, 500)
		out = p.Rows
		return err
	})
	if err != nil {
		f.t.Fatalf("timeline of %s: %v", slug, err)
	}
	return out
}

var testidNumber = regexp.MustCompile(`data-testid="([a-z-]+)"[^>]*>([0-9]+)<`)

// counters reads the overview's numeric data-testid counters.
func counters(body string) map[string]string {
	out := map[string]string{}
	for _, m := range testidNumber.FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// jobIDsIn returns the data-job-id values of rows with testid in body.
func jobIDsIn(body, testid string) []string {
	re := regexp.MustCompile(`data-testid="` + regexp.QuoteMeta(testid) + `" data-job-id="([0-9]+)"`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func has(list []string, id int64) bool {
	for _, s := range list {
		if s == fmt.Sprint(id) {
			return true
		}
	}
	return false
}

func detailReason(t *testing.T, e audit.Recorded) string {
	t.Helper()
	var d struct {
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		t.Fatalf("detail of event %d: %v", e.ID, err)
	}
	return d.Reason
}

func contains(body string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(body, p) {
			return false
		}
	}
	return true
}

var (
	regexpOlder = regexp.MustCompile(`href="(/admin/jobs\?[^"]*before=[0-9]+[^"]*)"[^>]*data-testid="older"`)
	regexpBulk  = regexp.MustCompile(`data-testid="bulk-headline" data-count="([0-9]+)"`)
	regexpMaxID = regexp.MustCompile(`name="max_id" value="([0-9]+)"`)
)

func httptestServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
