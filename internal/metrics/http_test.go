package metrics_test

import (
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/metrics"
)

func TestHTTPMethodIsAClosedSet(t *testing.T) {
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE"} {
		if got := metrics.HTTPMethod(m); got != m {
			t.Errorf("HTTPMethod(%q) = %q", m, got)
		}
	}
	for _, m := range []string{"", "get", "PROPFIND", "GET ", strings.Repeat("X", 60000)} {
		if got := metrics.HTTPMethod(m); got != metrics.MethodOther {
			t.Errorf("HTTPMethod(%.20q) = %.20q, want %q", m, got, metrics.MethodOther)
		}
	}
}
