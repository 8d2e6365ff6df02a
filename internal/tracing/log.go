package tracing

import (
	"context"
	"log/slog"

	"github.com/jejakhq/jejak/internal/reqctx"
)

// LogHandler wraps a slog.Handler so every record logged with a context
// carries the trace_id, tenant_id, job_id and worker_id found in it, without
// each call site repeating them. Attributes the call already has are not
// duplicated.
type LogHandler struct {
	next   slog.Handler
	preset map[string]bool // identifier keys already attached with WithAttrs
}

// NewLogHandler returns next wrapped in a LogHandler.
func NewLogHandler(next slog.Handler) *LogHandler { return &LogHandler{next: next} }

// Enabled defers to the wrapped handler.
func (h *LogHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle adds the context's identifiers and passes the record on.
func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		have := map[string]bool{}
		for k := range h.preset {
			have[k] = true
		}
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "trace_id", "tenant_id", "job_id", "worker_id":
				have[a.Key] = true
			}
			return true
		})
		if v := reqctx.Trace(ctx); v != "" && !have["trace_id"] {
			r.AddAttrs(slog.String("trace_id", v))
		}
		if v := reqctx.Tenant(ctx); v != 0 && !have["tenant_id"] {
			r.AddAttrs(slog.Int64("tenant_id", v))
		}
		if v := reqctx.Job(ctx); v != 0 && !have["job_id"] {
			r.AddAttrs(slog.Int64("job_id", v))
		}
		if v := reqctx.Worker(ctx); v != "" && !have["worker_id"] {
			r.AddAttrs(slog.String("worker_id", v))
		}
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs keeps the wrapping around the derived handler.
func (h *LogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	preset := map[string]bool{}
	for k := range h.preset {
		preset[k] = true
	}
	for _, a := range as {
		switch a.Key {
		case "trace_id", "tenant_id", "job_id", "worker_id":
			preset[a.Key] = true
		}
	}
	return &LogHandler{next: h.next.WithAttrs(as), preset: preset}
}

// WithGroup keeps the wrapping around the derived handler.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{next: h.next.WithGroup(name), preset: h.preset}
}
