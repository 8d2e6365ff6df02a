package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
)

// TestTenantTimelineByTraceAndJob: an owner narrows the timeline to one
// trace or one job; bad values are refused next to the field; another
// tenant's trace shows nothing; the jobs page links each job to its
// lifecycle and its request.
func TestTenantTimelineByTraceAndJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const trace = "aaaabbbbccccddddeeeeffff00001111"
	jobID := f.enqueue("toko-bunga-melati", job.EnqueueParams{TraceID: trace})
	record := func(slug, action string, trace string, jobID *int64) {
		tid := f.tenantID(slug)
		err := database.InTenantTx(ctx, f.db.App, tid, func(tx pgx.Tx) error {
			_, err := audit.NewRecorder(nil).Record(ctx, tx, audit.Event{TenantID: tid, ActorKind: audit.ActorSystem,
				Action: action, Entity: "job", EntityID: fmt.Sprint(jobID), TraceID: trace, JobID: jobID})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	record("toko-bunga-melati", "job.queued", trace, &jobID)
	record("toko-bunga-melati", "job.succeeded", trace, &jobID)
	record("toko-bunga-melati", "other.thing", "another-trace", nil)
	record("kopi-senja", "senja.secret", trace, nil) // same trace, other tenant

	c := f.client()
	c.login("budi@melati.test")
	byTrace := c.get("/t/toko-bunga-melati/audit?trace=" + trace)
	if byTrace.status != 200 {
		t.Fatalf("by trace: %d", byTrace.status)
	}
	if !strings.Contains(byTrace.body, `data-action="job.queued"`) || !strings.Contains(byTrace.body, `data-action="job.succeeded"`) ||
		strings.Contains(byTrace.body, `data-action="other.thing"`) || strings.Contains(byTrace.body, "senja.secret") {
		t.Fatal("trace filter shows the wrong events")
	}
	byJob := c.get(fmt.Sprintf("/t/toko-bunga-melati/audit?job=%d", jobID))
	if strings.Count(byJob.body, `data-testid="audit-event"`) != 2 || strings.Contains(byJob.body, "other.thing") {
		t.Fatal("job filter shows the wrong events")
	}
	for _, q := range []string{"trace=%3Cx%3E", "job=abc", "job=-3"} {
		if a := c.get("/t/toko-bunga-melati/audit?" + q); a.status != 422 || !strings.Contains(a.body, "field-error") {
			t.Errorf("%s: %d", q, a.status)
		}
	}
	jobs := c.get("/t/toko-bunga-melati/jobs")
	if !strings.Contains(jobs.body, fmt.Sprintf(`href="/t/toko-bunga-melati/audit?job=%d"`, jobID)) ||
		!strings.Contains(jobs.body, `href="/t/toko-bunga-melati/audit?trace=`+trace+`"`) {
		t.Fatal("jobs page lacks lifecycle and request links")
	}
	// Sari (kopi-senja) filtering by the same trace sees only her own event.
	other := f.client()
	other.login("sari@senja.test")
	mine := other.get("/t/kopi-senja/audit?trace=" + trace)
	if !strings.Contains(mine.body, "senja.secret") || strings.Contains(mine.body, "job.queued") {
		t.Fatal("trace filter crossed tenants")
	}
}
