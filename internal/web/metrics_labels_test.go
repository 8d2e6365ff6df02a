package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a log sink the server's goroutines write while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestMetricsMethodLabelIsClosed: requests with unknown methods, each name
// unique and long, are counted under method "other": no series carries a
// request's own method, so a stranger cannot grow /metrics. Their log
// lines say "other" too and cut the path they copy.
func TestMetricsMethodLabelIsClosed(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	logs := &lockedBuffer{}
	srv := httptest.NewServer(newHandler(fx.db, fx.jobs, slog.New(slog.NewJSONHandler(logs, nil)), 0))
	t.Cleanup(srv.Close)
	f := struct{ srv *httptest.Server }{srv}
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
		req, err := http.NewRequest(method, f.srv.URL+"/healthz/"+strings.Repeat("p", 4000), nil)
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

	// The request line is logged after the response is written: wait for
	// all n of them.
	var lines []map[string]any
	for deadline := time.Now().Add(10 * time.Second); ; {
		lines = lines[:0]
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" && m["method"] != "GET" {
				lines = append(lines, m)
			}
		}
		if len(lines) >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling a log sink with a deadline
	}
	if len(lines) < n {
		t.Fatalf("%d request log lines for the unknown methods, want %d", len(lines), n)
	}
	if strings.Contains(logs.String(), "XBLOWUP") {
		t.Error("a request's method reached the log")
	}
	for _, m := range lines {
		if m["method"] != "other" {
			t.Errorf("log line method %v, want other", m["method"])
		}
		if p, _ := m["path"].(string); len(p) > 512 {
			t.Errorf("log line copies a %d-byte path", len(p))
		}
	}
}
