package outbox_test

import (
	"context"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/tracing"
)

// TestPublishIsTracedAndCounted: the relay publishes each message in a
// span of the message's own trace (error status when the broker refused
// it) and reports how many it published and how many failed.
// Not parallel: it installs the process-wide tracer provider.
func TestPublishIsTracedAndCounted(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { tracing.Use(nil) })

	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	w := outbox.NewWriter(nil)
	traceA, traceB := tracing.NewTraceID(), tracing.NewTraceID()
	a, b := msg("a", 1), msg("b", 1)
	a.TraceID, b.TraceID = traceA, traceB
	ids := publish(t, db, w, tid, a, b)

	var mu sync.Mutex
	counted := map[string]int{}
	r := newRelay(t, db, outbox.RelayConfig{Sink: failSink{id: ids[1]}, OnPublished: func(result string, n int) {
		mu.Lock()
		counted[result] += n
		mu.Unlock()
	}})
	if n, err := r.RunOnce(context.Background()); err != nil || n != 2 {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	mu.Lock()
	if counted["ok"] != 1 || counted["error"] != 1 || len(counted) != 2 {
		t.Errorf("reported %v, want ok 1 and error 1", counted)
	}
	mu.Unlock()

	byTrace := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if s.Name() == "outbox.publish project.updated" {
			byTrace[s.SpanContext().TraceID().String()] = s
		}
	}
	sa, sb := byTrace[traceA], byTrace[traceB]
	if len(byTrace) != 2 || sa == nil || sb == nil {
		t.Fatalf("publish spans by trace: %v; want one in each message's trace", byTrace)
	}
	if sa.Status().Code == codes.Error || sb.Status().Code != codes.Error {
		t.Fatalf("statuses %v / %v: want ok for the published message, error for the refused one", sa.Status(), sb.Status())
	}
	found := false
	for _, kv := range sa.Attributes() {
		found = found || (kv.Key == "jejak.event_id" && kv.Value.AsString() == outbox.EventID(ids[0]))
	}
	if !found {
		t.Fatalf("span attributes %v lack jejak.event_id %s", sa.Attributes(), outbox.EventID(ids[0]))
	}
}
