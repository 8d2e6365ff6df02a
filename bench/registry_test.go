package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/testdb"
)

func TestSummaryLine(t *testing.T) {
	t.Parallel()
	rounds := []Result{
		{Metrics: []Metric{{"jobs_per_sec", 15000.4}, {"p50_ms", 1.234}}},
		{Metrics: []Metric{{"jobs_per_sec", 17000}, {"p50_ms", 3}}},
		{Metrics: []Metric{{"jobs_per_sec", 13000}, {"p50_ms", 2}}},
	}
	got := summaryLine("burndown", "", "river", rounds)
	want := "BENCH burndown system=river jobs_per_sec=15000 p50_ms=2.00 min=13000 max=17000 rounds=3 values=15000,17000,13000"
	if got != want {
		t.Fatalf("summaryLine:\n got %s\nwant %s", got, want)
	}
	loaded := append([]Result(nil), rounds...)
	for i := range loaded {
		loaded[i].Load1, loaded[i].LoadKnown = []float64{0.4, 0.61, 2}[i], true
	}
	got = summaryLine("burndown", "", "river", loaded)
	want = "BENCH burndown system=river jobs_per_sec=15000 p50_ms=2.00 min=13000 max=17000 rounds=3 values=15000,17000,13000 load1=0.40,0.61,2.00"
	if got != want {
		t.Fatalf("summaryLine with loads:\n got %s\nwant %s", got, want)
	}
	got = summaryLine("page /admin", "load=engine", "jejak", rounds[:1])
	want = "BENCH page /admin system=jejak load=engine jobs_per_sec=15000 p50_ms=1.23 min=15000 max=15000 rounds=1 values=15000"
	if got != want {
		t.Fatalf("summaryLine with labels:\n got %s\nwant %s", got, want)
	}
}

func TestVariantLine(t *testing.T) {
	t.Parallel()
	r := func(v float64) []Result { return []Result{{Metrics: []Metric{{"jobs_per_sec", v}}}} }
	got := variantLine("tenants burndown", "jejak", []string{"tenants=10", "tenants=1000", "tenants=10000"},
		[][]Result{r(20000), nil, r(18000)})
	want := "# tenants burndown system=jejak jobs_per_sec relative to tenants=10: tenants=10000 0.90×"
	if got != want {
		t.Fatalf("variantLine:\n got %s\nwant %s", got, want)
	}
	if got := variantLine("replicas", "jejak", []string{"replicas=1"}, [][]Result{r(5)}); got != "" {
		t.Fatalf("one variant: got %q, want none", got)
	}

	// Rounds in turn on a machine that drifts: the ratio within each round,
	// and its median, beside the ratio of the medians. Round 2 of
	// replicas=2 failed, so it has no pair.
	taken := func(round int, v float64) Result {
		return Result{Metrics: []Metric{{"jobs_per_sec", v}}, Round: round}
	}
	got = variantLine("replicas", "jejak", []string{"replicas=1", "replicas=2", "replicas=4"}, [][]Result{
		{taken(1, 2000), taken(2, 3000), taken(3, 3000)},
		{taken(1, 2200), taken(3, 2700)},
		{taken(1, 2800), taken(2, 2700), taken(3, 2400)},
	})
	want = "# replicas system=jejak jobs_per_sec relative to replicas=1: " +
		"replicas=2 0.82× (by round 1.10, 0.90; median 1.00); replicas=4 0.90× (by round 1.40, 0.90, 0.80; median 0.90)"
	if got != want {
		t.Fatalf("variantLine by round:\n got %s\nwant %s", got, want)
	}
}

func TestMedianPercentile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"median odd", median([]float64{3, 1, 2}), 2},
		{"median even", median([]float64{4, 1, 3, 2}), 2.5},
		{"p50 of 1..100", percentile(seq(100), 50), 50},
		{"p99 of 1..100", percentile(seq(100), 99), 99},
		{"p99 of 1..10", percentile(seq(10), 99), 10},
		{"p0 clamps to first", percentile(seq(10), 0), 1},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i + 1)
	}
	return out
}

func TestSelectBenches(t *testing.T) {
	saved := registry
	t.Cleanup(func() { registry = saved })
	registry = nil
	noop := func(context.Context, *Env, string) (Result, error) { return Result{}, nil }
	for _, n := range []string{"burndown", "continuous", "page /jobs", "page /audit"} {
		register(Bench{Name: n, Run: noop})
	}
	register(Bench{Name: "page /audit", Labels: "load=engine", Run: noop})
	tests := []struct {
		only    string
		want    string
		wantErr bool
	}{
		{"", "burndown,continuous,page /jobs,page /audit,page /audit load=engine", false},
		{"continuous", "continuous", false},
		{"page", "page /jobs,page /audit,page /audit load=engine", false},
		{"page /audit, burndown", "burndown,page /audit,page /audit load=engine", false},
		{"page /audit load=engine", "page /audit load=engine", false},
		{"nope", "", true},
	}
	for _, tc := range tests {
		bs, err := selectBenches(tc.only)
		if (err != nil) != tc.wantErr {
			t.Fatalf("selectBenches(%q) err = %v, wantErr %v", tc.only, err, tc.wantErr)
		}
		var names []string
		for _, b := range bs {
			names = append(names, b.ID())
		}
		if got := strings.Join(names, ","); got != tc.want {
			t.Errorf("selectBenches(%q) = %q, want %q", tc.only, got, tc.want)
		}
	}
}

func TestCheckLoopback(t *testing.T) {
	t.Parallel()
	for url, ok := range map[string]bool{
		"postgres://postgres@127.0.0.1:5432/postgres": true,
		"postgres://postgres@localhost/postgres":      true,
		"postgres://postgres@[::1]:5432/postgres":     true,
		"postgres://postgres@10.0.0.5:5432/postgres":  false,
		"postgres://postgres@db.example.com/postgres": false,
		"host=127.0.0.1 user=postgres":                false,
	} {
		if err := checkLoopback(url); (err == nil) != ok {
			t.Errorf("checkLoopback(%q) = %v, want ok=%v", url, err, ok)
		}
	}
}

// latencyCanBeZero reports whether m is a latency that a loaded machine
// can rightly make 0: a handler that starts before its commit's
// acknowledgement reaches the enqueuing goroutine counts as 0 (runLatency),
// and beside a benchmark most of the smoke run's 20 did.
func latencyCanBeZero(m Metric) bool {
	return strings.HasSuffix(m.Key, "_ms") && m.Value == 0
}

// testServer is the server the module's tests run benchmarks on:
// $BENCH_DATABASE_URL, else the main module's test cluster, so a benchmark
// run beside the tests (on the machine's server) and the tests do not take
// each other's connections.
func testServer(t *testing.T) string {
	if u := os.Getenv("BENCH_DATABASE_URL"); u != "" {
		return u
	}
	return testdb.ServerURL(t)
}

// TestQueueBenchmarksSmoke runs every benchmark (queues, pages quiet and
// under engine load, many tenants, replicas, HTTP load) once per available system with
// tiny sizes on a real PostgreSQL (the machine's, or the embedded cluster),
// so a broken harness fails here rather than in a long run. The tenants and
// replicas benchmarks run at 10/50 tenants and 1/2 replicas instead of their
// registered sizes.
func TestQueueBenchmarksSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	ctx := context.Background()
	url := testServer(t)
	// The suffix is per process: test runs on one machine share a
	// server, and one run's fresh databases must not be dropped by another.
	env := &Env{ServerURL: url, Log: testLogger(t), DBSuffix: fmt.Sprintf("_smoketest_%d", os.Getpid()), Cfg: Config{
		Jobs: 3000, Workers: 20, InsertBatch: 1000, Duration: 400 * time.Millisecond, Warmup: 100 * time.Millisecond,
		Backlog: 2000, PollInterval: 20 * time.Millisecond, FetchCooldown: 2 * time.Millisecond,
		ClaimBatch: 20, Conns: 4, Tenants: 3, LatencyJobs: 20, LatencyRate: 200, Timeout: time.Minute,
		ScaleAuditEvents: 3000, ScaleJobs: 2000, Requests: 5, Reseed: true,
		TenantsBacklog: 500, ReplicaJobs: 300, ReplicaWorkers: 5, ReplicaWarmup: 50, AppendWriters: 8,
	}}
	t.Cleanup(runAtExit)
	t.Cleanup(func() {
		if err := env.DropDatabase(context.Background(), env.DBName(scaleDBName)); err != nil {
			t.Logf("drop the smoke scale database: %v", err)
		}
	})
	var benches []Bench
	for _, b := range registry {
		if b.Name != "replicas" && b.Name != "http" && !strings.HasPrefix(b.Name, "tenants ") {
			benches = append(benches, b)
		}
	}
	for _, n := range []int{10, 50} {
		benches = append(benches,
			Bench{Name: "tenants burndown", Labels: fmt.Sprintf("tenants=%d", n), Run: tenantsBurndown(n, true)},
			Bench{Name: "tenants continuous", Labels: fmt.Sprintf("tenants=%d", n), Run: tenantsContinuous(n, true)})
	}
	benches = append(benches,
		Bench{Name: "tenants burndown", Labels: "tenants=50 fairness=off", Run: tenantsBurndown(50, false)},
		Bench{Name: "tenants continuous", Labels: "tenants=50 fairness=off", Run: tenantsContinuous(50, false)})
	// The HTTP family with a few sessions: every mix's requests (the 90/10
	// one has all of them) and a staff page.
	benches = append(benches,
		Bench{Name: "http", Labels: "sessions=4 mix=mix", Run: httpBench(mixNamed("mix"), 4)},
		Bench{Name: "http", Labels: "sessions=2 mix=staff_jobs", Run: httpBench(mixNamed("staff_jobs"), 2)})
	for _, n := range []int{1, 2} {
		benches = append(benches, Bench{Name: "replicas", Labels: fmt.Sprintf("replicas=%d", n), Run: replicasBench(n)})
	}
	for _, b := range benches {
		for _, sys := range b.systems() {
			began := time.Now()
			res, err := b.Run(ctx, env, sys)
			if err != nil {
				t.Fatalf("%s system=%s: %v", b.ID(), sys, err)
			}
			if len(res.Metrics) == 0 || !(res.Metrics[0].Value > 0 || latencyCanBeZero(res.Metrics[0])) {
				t.Fatalf("%s system=%s: primary metric not positive: %+v", b.ID(), sys, res.Metrics)
			}
			checkSmoke(t, b, res)
			// The run's length, so the smoke run's slowest benchmarks show.
			t.Logf("%s took=%.1fs", summaryLine(b.Name, b.Labels, sys, []Result{res}), time.Since(began).Seconds())
		}
	}
}

// checkSmoke asserts what each new benchmark must report beyond a positive
// primary metric.
func checkSmoke(t *testing.T, b Bench, res Result) {
	t.Helper()
	must := func(key string, ok func(float64) bool) {
		if v, found := res.Get(key); !found || !ok(v) {
			t.Errorf("%s: %s = %v (present %v)", b.ID(), key, v, found)
		}
	}
	positive := func(v float64) bool { return v > 0 }
	switch {
	case b.Labels == "load=engine":
		must("load_jobs_per_sec", positive)
	case strings.HasPrefix(b.Name, "tenants "):
		must("small_jobs", positive)
		must("small_wait_p95_ms", positive)
	case b.Name == "http":
		must("errors", func(v float64) bool { return v == 0 })
		must("requests", positive)
		must("web_cpu_per_req_ms", positive)
		must("p99_ms", positive)
	case b.Name == "replicas":
		must("run_twice", func(v float64) bool { return v == 0 })
		must("jobs", func(v float64) bool { return v == 300 })
		n, _ := strconv.Atoi(strings.TrimPrefix(b.Labels, "replicas="))
		// Which replicas get work is up to the claims; none is invented.
		must("workers_used", func(v float64) bool { return v >= 1 && int(v) <= n })
	}
}

func testLogger(t *testing.T) *slog.Logger {
	t.Helper()
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
