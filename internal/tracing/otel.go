package tracing

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/jejakhq/jejak/internal/reqctx"
)

// tracer is nil until Setup or Use installs a provider: then Start is a
// no-op that allocates nothing.
var tracer atomic.Pointer[trace.Tracer]

// Enabled reports whether spans are being exported.
func Enabled() bool { return tracer.Load() != nil }

// Setup exports spans over OTLP/HTTP to endpoint (the value of
// OTEL_EXPORTER_OTLP_ENDPOINT; the exporter also reads the other standard
// OTEL_EXPORTER_OTLP_* variables). An empty endpoint leaves tracing off.
// The returned function flushes and stops the exporter.
func Setup(ctx context.Context, endpoint, service, version string) (func(context.Context) error, error) {
	if endpoint == "" {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter for %s: %w", endpoint, err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName(service), semconv.ServiceVersion(version))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	Use(tp)
	return func(ctx context.Context) error {
		tracer.Store(nil)
		return tp.Shutdown(ctx)
	}, nil
}

// Use makes tp the provider spans go to (tests pass an SDK provider with
// an in-memory recorder); nil turns span export off again.
func Use(tp trace.TracerProvider) {
	if tp == nil {
		tracer.Store(nil)
		return
	}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t := tp.Tracer("github.com/jejakhq/jejak")
	tracer.Store(&t)
}

// Span is a started span, or nothing when export is off.
type Span struct{ s trace.Span }

// SpanID is the span's id in hex ("" when export is off).
func (s Span) SpanID() string {
	if s.s == nil {
		return ""
	}
	return s.s.SpanContext().SpanID().String()
}

// End ends the span, recording err as its status.
func (s Span) End(err error) {
	if s.s == nil {
		return
	}
	if err != nil {
		s.s.RecordError(err)
		s.s.SetStatus(codes.Error, err.Error())
	}
	s.s.End()
}

// Set adds attributes to the span.
func (s Span) Set(kv ...attribute.KeyValue) {
	if s.s != nil {
		s.s.SetAttributes(kv...)
	}
}

// Start starts a span named name as a child of the span in ctx; when ctx
// has none, the span joins the trace id ctx carries (reqctx.Trace), so a
// job attempt run long after its request still lands in the request's
// trace. parentSpanID, when known (an incoming traceparent), links the
// span to the caller's span.
func Start(ctx context.Context, name string, parentSpanID string, kv ...attribute.KeyValue) (context.Context, Span) {
	tp := tracer.Load()
	if tp == nil {
		return ctx, Span{}
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		if tid, err := trace.TraceIDFromHex(reqctx.Trace(ctx)); err == nil {
			sid, err := trace.SpanIDFromHex(parentSpanID)
			if err != nil {
				sid, _ = trace.SpanIDFromHex(NewSpanID())
			}
			ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true,
			}))
		}
	}
	ctx, s := (*tp).Start(ctx, name, trace.WithAttributes(kv...))
	return ctx, Span{s: s}
}
