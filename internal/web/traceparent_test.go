package web_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestTraceparentFollowsW3C: a valid traceparent's trace id is adopted; a
// header the W3C rules forbid (version ff, an all-zero trace or parent id,
// upper-case hex, a short id) starts a new trace instead of carrying the
// caller's bytes into logs, jobs and the trail.
func TestTraceparentFollowsW3C(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := newHandler(f.db, f.jobs, quietLog(), 0)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, tc := range []struct {
		header string
		adopt  bool
	}{
		{"00-" + trace + "-00f067aa0ba902b7-01", true},
		{"ff-" + trace + "-00f067aa0ba902b7-01", false},
		{"00-" + trace + "-0000000000000000-01", false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
		{"00-" + trace[:30] + "-00f067aa0ba902b7-01", false},
	} {
		req := httptest.NewRequest(http.MethodGet, "/login", nil)
		req.Header.Set("traceparent", tc.header)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		got := rec.Header().Get("X-Trace-Id")
		if len(got) != 32 {
			t.Fatalf("%q: trace id %q", tc.header, got)
		}
		if adopted := got == trace; adopted != tc.adopt {
			t.Errorf("%q: trace %q adopted=%v, want %v", tc.header, got, adopted, tc.adopt)
		}
		if !tc.adopt && got == "00000000000000000000000000000000" {
			t.Errorf("%q: the all-zero trace id was kept", tc.header)
		}
	}
}
