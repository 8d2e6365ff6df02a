package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/tracing"
)

func TestParseTraceparent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		ok      bool
		trace   string
		sampled bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true, "4bf92f3577b34da6a3ce929d0e0e4736", true},
		{" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00 ", true, "4bf92f3577b34da6a3ce929d0e0e4736", false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false, "", false}, // all-zero trace
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false, "", false}, // all-zero span
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, "", false}, // forbidden version
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false, "", false}, // upper case
		{"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", false, "", false},  // short
		{"", false, "", false},
		{"<script>", false, "", false},
	} {
		p, ok := tracing.ParseTraceparent(tc.in)
		if ok != tc.ok || p.TraceID != tc.trace || (ok && p.Sampled != tc.sampled) {
			t.Errorf("ParseTraceparent(%q) = %+v, %v", tc.in, p, ok)
		}
	}
	id := tracing.NewTraceID()
	if !tracing.IsW3CTraceID(id) || tracing.IsW3CTraceID("another-trace") {
		t.Fatalf("IsW3CTraceID: %s", id)
	}
	h := tracing.Traceparent(id, tracing.NewSpanID(), true)
	if p, ok := tracing.ParseTraceparent(h); !ok || p.TraceID != id {
		t.Fatalf("round trip of %q failed", h)
	}
}

// TestLogHandlerAddsContextIDs: records logged with a context carry its
// identifiers once, even when the call site or the logger already set one.
func TestLogHandlerAddsContextIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(tracing.NewLogHandler(slog.NewJSONHandler(&buf, nil)))
	ctx := reqctx.WithJob(reqctx.WithTenant(reqctx.WithTrace(context.Background(), "t-1"), 7), 42, "w-1")
	log.InfoContext(ctx, "one")
	log.With("worker_id", "preset").InfoContext(ctx, "two", "trace_id", "explicit")
	log.Info("three") // no context values
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines: %q", lines)
	}
	var one map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &one)
	if one["trace_id"] != "t-1" || one["tenant_id"] != float64(7) || one["job_id"] != float64(42) || one["worker_id"] != "w-1" {
		t.Fatalf("first line: %v", one)
	}
	if strings.Count(lines[1], `"trace_id"`) != 1 || strings.Count(lines[1], `"worker_id"`) != 1 ||
		!strings.Contains(lines[1], `"trace_id":"explicit"`) || !strings.Contains(lines[1], `"worker_id":"preset"`) {
		t.Fatalf("second line duplicates or overrides: %s", lines[1])
	}
	if strings.Contains(lines[2], "trace_id") {
		t.Fatalf("third line has ids without a context: %s", lines[2])
	}
}

// TestStartWithoutExportIsFree: with no provider, Start returns the same
// context and a span that does nothing.
func TestStartWithoutExportIsFree(t *testing.T) {
	if tracing.Enabled() {
		t.Skip("a provider is installed by another test in this binary")
	}
	ctx := context.Background()
	got, span := tracing.Start(ctx, "x", "")
	if got != ctx || span.SpanID() != "" {
		t.Fatal("Start did work with export off")
	}
	span.End(nil)
	if n := testing.AllocsPerRun(100, func() { _, s := tracing.Start(ctx, "x", ""); s.End(nil) }); n != 0 {
		t.Fatalf("Start allocates %v times with export off", n)
	}
}
