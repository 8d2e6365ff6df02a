package webhook_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/tracing"
	"github.com/jejakhq/jejak/internal/webhook"
)

// TestEachDeliveryAttemptIsASpan: every attempt is a webhook.deliver span,
// child of the job attempt that made it, in the event's trace, with the
// receiver's status and an error status when the receiver refused.
// Not parallel: it installs the process-wide tracer provider.
func TestEachDeliveryAttemptIsASpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { tracing.Use(nil) })

	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	rcv := newReceiver(t, nil, 500, 200)
	if _, err := v.svc.Create(ctx, v.tenant, v.owner, rcv.URL+"/hook", "project.created"); err != nil {
		t.Fatal(err)
	}
	trace := tracing.NewTraceID()
	if _, err := v.fanout.HandleEvent(ctx, v.tenant, 7, "project.created", []byte(`{"id":"evt_7"}`), trace); err != nil {
		t.Fatal(err)
	}
	var parents []string
	for round := range 2 {
		jobs, err := v.engine.Claim(ctx, "w1", 10)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("round %d: claimed %d jobs, %v", round, len(jobs), err)
		}
		j := jobs[0]
		// As the engine does: the attempt runs in the job's trace, inside
		// the job attempt's span.
		actx, attempt := tracing.Start(reqctx.WithTrace(ctx, j.TraceID), "job.attempt webhook.deliver", "")
		if err := v.deliver.Handle(actx, j); err != nil {
			t.Fatal(err)
		}
		attempt.End(nil)
		parents = append(parents, attempt.SpanID())
		if err := v.engine.Complete(ctx, "w1", j.ID); err != nil {
			t.Fatal(err)
		}
		v.clk.Advance(time.Hour) // the retry is due
	}
	var got []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "webhook.deliver" {
			got = append(got, s)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d webhook.deliver spans, want 2 (one per attempt)", len(got))
	}
	for i, s := range got {
		if s.SpanContext().TraceID().String() != trace {
			t.Errorf("attempt %d span in trace %s, want %s", i+1, s.SpanContext().TraceID(), trace)
		}
		if s.Parent().SpanID().String() != parents[i] {
			t.Errorf("attempt %d span's parent = %s, want the job attempt %s", i+1, s.Parent().SpanID(), parents[i])
		}
		attrs := map[string]any{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.AsInterface()
		}
		if attrs["jejak.attempt"] != int64(i+1) {
			t.Errorf("attempt %d span attributes %v", i+1, attrs)
		}
	}
	if got[0].Status().Code != codes.Error || got[1].Status().Code == codes.Error {
		t.Fatalf("statuses = %v, %v; want error for the 500, ok for the 200", got[0].Status(), got[1].Status())
	}
}
