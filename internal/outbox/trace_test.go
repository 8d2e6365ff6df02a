package outbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jejakhq/jejak/internal/database"
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

// TestPublishIndexesTraces: a message published with a trace id is found
// by that trace (outbox_traces, which the forensics search reads), through
// Publish and PublishMany alike; one without a trace is not indexed, and a
// rolled back publish indexes nothing.
func TestPublishIndexesTraces(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tid := newTenant(t, db, "toko")
	w := outbox.NewWriter(nil)
	one, many, lost := tracing.NewTraceID(), tracing.NewTraceID(), tracing.NewTraceID()
	a := msg("a", 1)
	a.TraceID = one
	ids := publish(t, db, w, tid, a)
	b, c := msg("b", 1), msg("c", 1)
	b.TraceID = many
	if err := database.InTenantTx(ctx, db.App, tid, func(tx pgx.Tx) error {
		return w.PublishMany(ctx, tx, tid, []outbox.Message{b, c})
	}); err != nil {
		t.Fatal(err)
	}
	d := msg("d", 1)
	d.TraceID = lost
	boom := errors.New("domain write failed")
	if err := database.InTenantTx(ctx, db.App, tid, func(tx pgx.Tx) error {
		if _, err := w.Publish(ctx, tx, tid, d); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("rolled back publish: %v", err)
	}

	rows, err := db.Admin.Query(ctx, `SELECT t.trace_id, t.message_id, m.aggregate_id FROM outbox_traces t
		JOIN outbox_messages m ON m.tenant_id = t.tenant_id AND m.id = t.message_id
		WHERE t.tenant_id = $1 ORDER BY t.message_id`, tid)
	if err != nil {
		t.Fatal(err)
	}
	type traced struct {
		trace string
		id    int64
		agg   string
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (traced, error) {
		var x traced
		return x, r.Scan(&x.trace, &x.id, &x.agg)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != (traced{one, ids[0], "a"}) || got[1].trace != many || got[1].agg != "b" {
		t.Fatalf("traces indexed: %+v; want message a under %s and message b under %s, nothing else", got, one, many)
	}
}
