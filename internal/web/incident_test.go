package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/tracing"
)

// syncBuffer is a log sink the engine's goroutines may write concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestOneTraceTellsTheIncident follows one W3C trace id from a request's
// traceparent header to the response headers, the audit event the request
// writes, a job enqueued under it, the job that job's handler enqueues in
// another tenant (inheriting the trace), their attempts (one failed), the
// JSON logs and the exported spans — and then finds all of it, in time
// order, on the staff incident page, flagged as spanning two tenants.
func TestOneTraceTellsTheIncident(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	f := newFixture(t)
	ctx := context.Background()
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"

	// 1. The request: a project created with an incoming traceparent.
	owner := f.client()
	owner.login("budi@melati.test")
	form := owner.withCSRF(url.Values{"name": {"Insiden"}})
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/t/toko-bunga-melati/projects", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
	res := owner.do(req)
	if res.status != http.StatusSeeOther {
		t.Fatalf("create project: %d %s", res.status, res.body)
	}
	if got := res.header.Get("X-Trace-Id"); got != trace {
		t.Fatalf("X-Trace-Id = %q, want %q", got, trace)
	}
	if tp, ok := tracing.ParseTraceparent(res.header.Get("traceparent")); !ok || tp.TraceID != trace {
		t.Fatalf("response traceparent %q does not carry the trace", res.header.Get("traceparent"))
	}

	// 2. Work the request caused: a job in melati whose handler enqueues
	// follow-up work in senja without naming a trace.
	logs := &syncBuffer{}
	log := slog.New(tracing.NewLogHandler(slog.NewJSONHandler(logs, nil)))
	engine, err := job.New(job.Config{Pool: f.db.System, Logger: log, Workers: 1, WorkerID: "worker-a",
		Backoff: func(int) time.Duration { return 0 }, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	melati, senja := f.tenantID("toko-bunga-melati"), f.tenantID("kopi-senja")
	budi := f.userID("budi@melati.test")
	var tries atomic.Int32
	engine.Register("test.parent", func(ctx context.Context, j *job.Job) error {
		if tries.Add(1) == 1 {
			return errors.New("upstream 503")
		}
		log.InfoContext(ctx, "parent job handling")
		return database.InTenantTx(ctx, f.db.App, senja, func(tx pgx.Tx) error {
			_, err := engine.Enqueue(ctx, tx, job.EnqueueParams{TenantID: senja, Kind: "test.child", Payload: json.RawMessage(`{}`)})
			return err
		})
	}, job.KindOptions{})
	engine.Register("test.child", func(context.Context, *job.Job) error { return nil }, job.KindOptions{})
	reqCtx := reqctx.WithTrace(ctx, trace)
	var parentID int64
	err = database.InTenantTx(reqCtx, f.db.App, melati, func(tx pgx.Tx) error {
		e, err := engine.Enqueue(reqCtx, tx, job.EnqueueParams{TenantID: melati, Kind: "test.parent", Payload: json.RawMessage(`{}`), RequestedBy: &budi})
		parentID = e.ID
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Stop(context.Background()) })
	deadline := time.Now().Add(30 * time.Second)
	for f.count(`SELECT count(*) FROM jobs WHERE trace_id = $1 AND state = 'succeeded'`, trace) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("jobs of the trace did not both succeed in 30s")
		}
		time.Sleep(20 * time.Millisecond) //nolint:forbidigo // polling with a deadline
	}
	if n := f.count(`SELECT count(*) FROM job_traces WHERE trace_id = $1`, trace); n != 2 {
		t.Fatalf("trace index has %d jobs of the trace, want 2", n)
	}
	if n := f.count(`SELECT count(*) FROM jobs WHERE tenant_id = $1 AND kind = 'test.child' AND trace_id = $2`, senja, trace); n != 1 {
		t.Fatalf("the child job did not inherit the trace")
	}

	// 3. The logs carry the identifiers from the context.
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "parent job handling") {
			_ = json.Unmarshal([]byte(l), &line)
		}
	}
	if line["trace_id"] != trace || line["job_id"] != float64(parentID) || line["tenant_id"] != float64(melati) || line["worker_id"] != "worker-a" {
		t.Fatalf("handler log line lacks context identifiers: %v", line)
	}

	// 4. Spans: the request and both job attempts share the trace; the
	// request span's parent is the caller's span.
	var names []string
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID().String() != trace {
			continue
		}
		names = append(names, s.Name())
		if strings.HasPrefix(s.Name(), "HTTP ") && s.Parent().SpanID().String() != "00f067aa0ba902b7" {
			t.Errorf("request span's parent = %s, want the caller's span", s.Parent().SpanID())
		}
	}
	for _, want := range []string{"HTTP POST", "job.enqueue test.parent", "job.enqueue test.child", "job.attempt test.parent", "job.attempt test.child"} {
		if !contains(strings.Join(names, "|"), want) {
			t.Errorf("no span %q in trace; got %v", want, names)
		}
	}

	// 5. The incident page.
	staff := f.client()
	staff.login("support@jejak.test")
	page := staff.get("/admin/search?trace=" + trace)
	if page.status != http.StatusOK {
		t.Fatalf("incident page: %d", page.status)
	}
	body := page.body
	for _, want := range []string{
		`data-testid="cross-tenant"`, "toko-bunga-melati", "kopi-senja",
		`data-action="project.create"`, "Budi Santoso", "test.parent enqueued", "test.child enqueued",
		"attempt 1 failed (transient)", "upstream 503", "worker-a", "attempt 2 succeeded",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("incident page lacks %q", want)
		}
	}
	// The rows read in the reader's language; codes (kinds, actions) stay.
	idPage := staff.getLang("/admin/search?trace="+trace, "id")
	for _, want := range []string{"test.parent diantrekan", "test.child diantrekan", "percobaan 1 gagal (" + i18n.In(i18n.ID, "class.transient") + ")",
		"percobaan 2 berhasil", "kini " + i18n.In(i18n.ID, "state.succeeded") + " setelah 2/", `data-action="project.create"`} {
		if !strings.Contains(idPage.body, want) {
			t.Errorf("incident page in id lacks %q", want)
		}
	}
	for _, english := range []string{"test.parent enqueued", "attempt 1 failed", "attempt 2 succeeded", "now succeeded after"} {
		if strings.Contains(idPage.body, english) {
			t.Errorf("incident page in id shows %q", english)
		}
	}
	if !strings.Contains(body, "now succeeded after 2/") {
		t.Errorf("incident page in en lacks the job's detail")
	}
	// Time order: the request's audit event, then the parent's enqueue,
	// its failed attempt, the child's enqueue.
	order := []string{`data-action="project.create"`, "test.parent enqueued", "attempt 1 failed", "test.child enqueued"}
	last := -1
	for _, w := range order {
		i := strings.Index(body, w)
		if i <= last {
			t.Fatalf("timeline out of order at %q (%d after %d)", w, i, last)
		}
		last = i
	}
	if jobs := jobIDsIn(body, "trace-job"); len(jobs) != 2 || !has(jobs, parentID) {
		t.Fatalf("trace jobs on the page: %v", jobs)
	}
	if !strings.Contains(body, fmt.Sprintf(`href="/admin/jobs/%d"`, parentID)) {
		t.Error("no link to the parent job")
	}
	// Another trace shows nothing of this one.
	other := staff.get("/admin/search?trace=ffffffffffffffffffffffffffffffff")
	if other.status != http.StatusOK || !strings.Contains(other.body, `data-testid="no-trace"`) || strings.Contains(other.body, "test.parent") {
		t.Fatalf("unknown trace: %d", other.status)
	}
}
