package web_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMetricsMethodLabelIsClosed: requests with unknown methods, each name
// unique and long, are counted under method "other": no series carries a
// request's own method, so a stranger cannot grow /metrics.
func TestMetricsMethodLabelIsClosed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	scrapeBody := func() string {
		t.Helper()
		res, err := http.Get(f.srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("scrape: %d %v", res.StatusCode, err)
		}
		return string(b)
	}
	before := len(scrapeBody())
	const n = 40
	for i := range n {
		method := fmt.Sprintf("XBLOWUP%d%s", i, strings.Repeat("Q", 4000))
		req, err := http.NewRequest(method, f.srv.URL+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		res.Body.Close()
	}
	body := scrapeBody()
	if strings.Contains(body, "XBLOWUP") {
		t.Fatal("a request's method reached a metric label")
	}
	var other float64
	for series, v := range scrape(t, body) {
		if strings.HasPrefix(series, "jejak_http_requests_total{") && strings.Contains(series, `method="other"`) {
			other += v
		}
	}
	if other < n {
		t.Errorf("requests with unknown methods counted under method=\"other\": %v, want ≥ %d", other, n)
	}
	// The scrape grows by a few series (the "other" ones and this scrape's
	// own), not by anything proportional to what was sent (n × 4 KB).
	if grown := len(body) - before; grown > 8<<10 {
		t.Errorf("/metrics grew by %d bytes after %d unknown-method requests", grown, n)
	}
}
