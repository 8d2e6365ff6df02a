// Package tracing carries one trace id from an HTTP request to the jobs it
// enqueues, the jobs those jobs enqueue and their log lines: W3C
// traceparent parsing and formatting, a log/slog handler that stamps
// trace_id, tenant_id, job_id and worker_id from the context, and optional
// OpenTelemetry span export (only when an OTLP endpoint is configured, so
// an ordinary run pays one atomic load per would-be span).
package tracing

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"strings"
)

var traceparentRE = regexp.MustCompile(`^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$`)

const zeroTrace = "00000000000000000000000000000000"

// Parent is what a W3C traceparent header names: the trace and the
// caller's span within it.
type Parent struct {
	TraceID string // 32 lowercase hex digits
	SpanID  string // 16 lowercase hex digits
	Sampled bool
}

// ParseTraceparent reads a W3C traceparent header; ok is false when the
// header is absent or malformed (including the all-zero ids the
// specification forbids), in which case the caller starts a new trace.
func ParseTraceparent(h string) (p Parent, ok bool) {
	m := traceparentRE.FindStringSubmatch(strings.TrimSpace(h))
	if m == nil || m[1] == "ff" || m[2] == zeroTrace || m[3] == "0000000000000000" {
		return Parent{}, false
	}
	flags, _ := hex.DecodeString(m[4])
	return Parent{TraceID: m[2], SpanID: m[3], Sampled: flags[0]&1 == 1}, true
}

// Traceparent formats a version-00 traceparent header.
func Traceparent(traceID, spanID string, sampled bool) string {
	f := "00"
	if sampled {
		f = "01"
	}
	return "00-" + traceID + "-" + spanID + "-" + f
}

// IsW3CTraceID reports whether id can be used as a W3C / OpenTelemetry
// trace id (32 lowercase hex digits, not all zero). Jejak's own ids are;
// ids from other systems may not be and then only travel as text.
func IsW3CTraceID(id string) bool {
	if len(id) != 32 || id == zeroTrace {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// NewTraceID returns a random 32-hex-digit trace id.
func NewTraceID() string { return randomHex(16) }

// NewSpanID returns a random 16-hex-digit span id.
func NewSpanID() string { return randomHex(8) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
