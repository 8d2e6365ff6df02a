package main

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestStatCPUTicks(t *testing.T) {
	t.Parallel()
	// Fields 14 and 15 (utime, stime) are 1234 and 56; the command names
	// hold spaces and parentheses, which the parser must not count.
	rest := " S 1 2 3 0 -1 4194560 100 0 0 0 1234 56 0 0 20 0 1 0 99 123456 789 18446744073709551615"
	for _, comm := range []string{"(postgres)", "(web)", "(a b) c)", "((x))"} {
		got, err := statCPUTicks("4242 " + comm + rest)
		if err != nil || got != 1290 {
			t.Errorf("comm %s: %d, %v; want 1290", comm, got, err)
		}
	}
	for _, bad := range []string{"", "4242 postgres S 1", "4242 (postgres) S 1 2 3", "4242 (p) S 1 2 3 0 -1 4 5 6 7 8 x 56 0"} {
		if _, err := statCPUTicks(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestMachineTicks(t *testing.T) {
	t.Parallel()
	// user nice system idle iowait irq softirq steal guest guest_nice
	before, err := parseMachineTicks("cpu  100 0 50 800 50 0 0 0 7 7\ncpu0 50 0 25 400 25 0 0 0 0 0\n")
	if err != nil || before != (machineTicks{idle: 850, total: 1000}) {
		t.Fatalf("before: %+v, %v; want idle 850 of 1000", before, err)
	}
	after := counters{machine: machineTicks{idle: 900, total: 1200}}.sub(counters{machine: before})
	if got := after.machine.idleShare(); got != 0.25 {
		t.Errorf("idle share %v, want 0.25 (50 idle ticks of 200)", got)
	}
	if got := (machineTicks{}).idleShare(); got != 0 {
		t.Errorf("idle share of no time %v, want 0", got)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6", "cpu 1 2 x 4 5 6"} {
		if _, err := parseMachineTicks(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCountersSub(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	before := counters{webCPU: 100 * ms, statements: 1000, benchCPU: 40 * ms, pgByPid: map[int]time.Duration{
		1: 50 * ms, // busy throughout
		2: 70 * ms, // exits in the window: its last part is lost
		3: 10 * ms, // idle throughout
	}}
	after := counters{webCPU: 400 * ms, statements: 1600, benchCPU: 90 * ms, pgByPid: map[int]time.Duration{
		1: 250 * ms,
		3: 10 * ms,
		4: 30 * ms, // started in the window: all of it counts
	}}
	d := after.sub(before)
	if d.webCPU != 300*ms || d.statements != 600 || d.pgCPU != 230*ms || d.benchCPU != 50*ms {
		t.Fatalf("sub = web %s, statements %d, pg %s, own %s; want 300ms, 600, 230ms, 50ms", d.webCPU, d.statements, d.pgCPU, d.benchCPU)
	}
	// A backend whose CPU time went down (its pid reused by a new one) is
	// left out rather than counted negative.
	reused := counters{pgByPid: map[int]time.Duration{1: 20 * ms}}
	if d := reused.sub(before); d.pgCPU != 0 {
		t.Fatalf("a backend whose CPU went down counted %s", d.pgCPU)
	}
}

func TestHTTPRunResult(t *testing.T) {
	t.Parallel()
	lat := seq(100) // 1..100 ms
	r := httpRun{window: 10 * time.Second, lat: lat, ok: 98, errors: 2,
		before: counters{webCPU: time.Second, statements: 10, pgByPid: map[int]time.Duration{7: time.Second}},
		after:  counters{webCPU: 1200 * time.Millisecond, statements: 710, pgByPid: map[int]time.Duration{7: 1100 * time.Millisecond}},
		behind: 3, undelivered: 40, held: 12,
	}
	res := r.result(false, 3.5)
	want := map[string]float64{
		"req_per_sec": 9.8, "p50_ms": 50, "p95_ms": 95, "p99_ms": 99, "errors": 2,
		"web_cpu_per_req_ms": 2, "pg_cpu_per_req_ms": 1, "xact_per_req": 7, "requests": 100, "loadavg_1m": 3.5,
		// Counts at the window's end, not per request.
		"fanout_behind": 3, "webhooks_pending": 40, "webhooks_held": 12,
	}
	for k, v := range want {
		if got, ok := res.Get(k); !ok || got < v-1e-9 || got > v+1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if res.Metrics[0].Key != "req_per_sec" {
		t.Errorf("primary metric %s, want req_per_sec", res.Metrics[0].Key)
	}
	if _, ok := r.result(true, 0).Get("stmts_per_req"); !ok {
		t.Error("with pg_stat_statements the line does not say stmts_per_req")
	}
}

func TestCSRFToken(t *testing.T) {
	t.Parallel()
	page := `<form method="post" action="/logout"><input type="hidden" name="_csrf" value="tok-EN_123"/></form>
		<form><input type="hidden" name="_csrf" value="second"/></form>`
	if got, err := csrfToken([]byte(page)); err != nil || got != "tok-EN_123" {
		t.Fatalf("csrfToken = %q, %v", got, err)
	}
	for _, bad := range []string{"", `<input name="_csrf" value="">`, `<input name="csrf" value="x">`} {
		if got, err := csrfToken([]byte(bad)); err == nil {
			t.Errorf("%q gave token %q", bad, got)
		}
	}
}

func TestHTTPGood(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		method string
		status int
		want   bool
	}{
		{http.MethodGet, 200, true},
		{http.MethodGet, 303, false}, // a lost session sent to /login
		{http.MethodGet, 404, false},
		{http.MethodGet, 0, false}, // no answer
		{http.MethodPost, 303, true},
		{http.MethodPost, 200, true},
		{http.MethodPost, 403, false},
		{http.MethodPost, 503, false},
	} {
		if got := good(tc.method, tc.status); got != tc.want {
			t.Errorf("good(%s, %d) = %v", tc.method, tc.status, got)
		}
	}
}

// TestSignInSessionAsksForGzipWhenTold: -http-gzip sessions ask for
// compressed answers and read them (the CSRF token of a gzipped page),
// and the others never ask.
func TestSignInSessionAsksForGzipWhenTold(t *testing.T) {
	t.Parallel()
	page := func(tok string) string {
		return `<form method="post"><input type="hidden" name="_csrf" value="` + tok + `"/></form>` + strings.Repeat("<p>padding</p>", 200)
	}
	for _, gz := range []bool{true, false} {
		var mu sync.Mutex
		asked := map[string]bool{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			accepts := strings.Contains(r.Header.Get("Accept-Encoding"), "gzip")
			mu.Lock()
			asked[r.Method+" "+r.URL.Path] = accepts
			mu.Unlock()
			if r.Method == http.MethodPost {
				http.Redirect(w, r, "/home", http.StatusSeeOther)
				return
			}
			body := page("login-tok")
			if r.URL.Path == "/home" {
				body = page("session-tok")
			}
			if !accepts {
				_, _ = io.WriteString(w, body)
				return
			}
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			_, _ = io.WriteString(zw, body)
			_ = zw.Close()
		}))
		sess, err := signInSession(context.Background(), srv.URL, "budi@melati.test", gz)
		srv.Close()
		if err != nil {
			t.Fatalf("gzip %v: %v", gz, err)
		}
		if sess.csrf != "session-tok" {
			t.Errorf("gzip %v: the landing page's token read as %q", gz, sess.csrf)
		}
		for req, a := range asked {
			if a != gz {
				t.Errorf("gzip %v: %s asked for gzip: %v", gz, req, a)
			}
		}
		if len(asked) != 3 {
			t.Errorf("gzip %v: requests %v, want GET /login, POST /login, GET /home", gz, asked)
		}
	}
}

// TestPaceNeverRunsAhead: however fast its tokens are taken, pace hands
// out no more than rate a second (one more at the start), and it does
// hand them out.
func TestPaceNeverRunsAhead(t *testing.T) {
	t.Parallel()
	const rate = 200
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	tokens := pace(ctx, rate)
	n := 0
	for time.Since(start) < 300*time.Millisecond {
		<-tokens
		n++
		if limit := int(time.Since(start).Seconds()*rate) + 1; n > limit {
			t.Fatalf("%d tokens after %s, more than the %d the rate allows", n, time.Since(start), limit)
		}
	}
	if n < 2 {
		t.Fatalf("%d tokens in 300 ms at %d a second", n, rate)
	}
}
