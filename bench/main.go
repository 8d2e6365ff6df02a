// Command bench measures Jejak's job engine against River v0.51 on one
// PostgreSQL in one run: burn-down, continuous insert+work, and enqueue→start
// latency, interleaved round by round (jejak, river, jejak, river, …) so a
// change in the machine's disk or load hits both systems alike. Other
// benchmarks (audit timeline, pages) plug into the same registry.
//
// Usage: cd bench && go run . [flags]   (or `make bench BENCH_ARGS=...`)
//
// Output: progress and context lines start with "#"; results are one line
// each, "BENCH <name> system=<s> <metric>=<median> ... min= max= rounds=".
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/pgcluster"
)

const localServer = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

func main() {
	os.Exit(run())
}

// options are the command line's settings that are not the benchmarks'
// own Config.
type options struct {
	dbURL, pgdata, only, systems, cpuProfile string
	embedded, pgTest, verbose, list          bool
	rounds, conns                            int
	quiet                                    quietGate
}

// parseFlags reads the command line.
func parseFlags() (Config, options) {
	var cfg Config
	var o options
	flag.StringVar(&o.dbURL, "database-url", os.Getenv("BENCH_DATABASE_URL"), "superuser URL of a loopback PostgreSQL (default $BENCH_DATABASE_URL, else "+localServer+" when reachable, else an embedded cluster)")
	flag.BoolVar(&o.embedded, "embedded", false, "use the embedded cluster in -pgdata even when a server is reachable")
	flag.StringVar(&o.pgdata, "pgdata", filepath.Join(os.TempDir(), "jejak-bench-pg"), "data directory of the embedded cluster used when no server is reachable")
	flag.StringVar(&o.only, "only", "", "comma-separated benchmarks to run (default all): "+strings.Join(benchNames(), ", "))
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; each round runs every selected benchmark on every system in turn")
	flag.BoolVar(&o.pgTest, "pg-test-fsync", false, "also run pg_test_fsync -s 1 before and after (about 15 s each)")
	flag.BoolVar(&o.verbose, "v", false, "log the systems' own info messages")
	flag.BoolVar(&o.list, "list", false, "list benchmarks and exit")
	flag.StringVar(&o.systems, "systems", "", "comma-separated systems to run (default: each benchmark's own list)")
	flag.Float64Var(&o.quiet.threshold, "quiet-load", 0, "before each benchmark run, wait until the 1-minute load average is below this (0 = do not wait; make bench-quiet sets it)")
	flag.DurationVar(&o.quiet.maxWait, "quiet-max-wait", 15*time.Minute, "-quiet-load: longest wait before one run; then it runs anyway, its load1 printed beside it")
	flag.IntVar(&cfg.Jobs, "jobs", 200_000, "burndown: pre-inserted no-op jobs")
	flag.IntVar(&cfg.Workers, "workers", 100, "worker goroutines per system")
	flag.IntVar(&cfg.InsertBatch, "insert-batch", 5_000, "jobs per batch insert")
	flag.DurationVar(&cfg.Duration, "duration", 20*time.Second, "continuous: measured window")
	flag.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "continuous: unmeasured lead-in")
	flag.IntVar(&cfg.Backlog, "backlog", 20_000, "continuous: the producer keeps about this many jobs queued")
	flag.DurationVar(&cfg.PollInterval, "poll", 20*time.Millisecond, "fallback poll interval (River FetchPollInterval, Jejak PollInterval)")
	flag.DurationVar(&cfg.FetchCooldown, "fetch-cooldown", 2*time.Millisecond, "River FetchCooldown (as in `river bench`)")
	flag.IntVar(&cfg.ClaimBatch, "claim-batch", 0, "Jejak claim batch size (0 = -workers, like River's fetch limit)")
	flag.IntVar(&o.conns, "conns", 10, "connection pool size per system")
	flag.IntVar(&cfg.Tenants, "tenants", 10, "Jejak tenants the jobs are spread over (fairness on)")
	flag.IntVar(&cfg.LatencyJobs, "latency-jobs", 200, "latency: jobs enqueued one per transaction")
	flag.IntVar(&cfg.LatencyRate, "latency-rate", 50, "latency: enqueues per second")
	flag.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "safety limit per run")
	flag.IntVar(&cfg.TenantsBacklog, "tenants-backlog", 100_000, "tenants continuous: jobs kept queued (90% one tenant) at every tenant count")
	flag.IntVar(&cfg.ReplicaJobs, "replica-jobs", 10_000, "replicas: points.award jobs handled per run")
	flag.IntVar(&cfg.ReplicaWorkers, "replica-workers", 200, "replicas: JEJAK_WORKERS of each replica (the jobs of a tenant in flight at once bound its award batches: see docs/benchmarks.md)")
	flag.IntVar(&cfg.ReplicaWarmup, "replica-warmup", 4_000, "replicas: unmeasured points.award jobs run first, so that every replica has opened its connections")
	flag.IntVar(&cfg.ReplicaConns, "replica-conns", 0, "replicas: JEJAK_DB_CONNS of each replica (0: serve's default, at most 70 / (2 × replicas) to fit max_connections 100)")
	flag.IntVar(&cfg.ScaleAuditEvents, "audit-events", 10_000_000, "pages/audit_timeline: audit events in the scale database")
	flag.IntVar(&cfg.ScaleJobs, "scale-jobs", 1_000_000, "pages: jobs in the scale database")
	flag.IntVar(&cfg.Requests, "requests", 200, "pages/audit_timeline: timed requests per benchmark and round (after 20 warm-up requests)")
	flag.StringVar(&cfg.ScaleDB, "scale-db", scaleDBName, "pages/audit_timeline/buffers: name of the scale database (a copy with schema changes, say)")
	flag.BoolVar(&cfg.ScaleNoMigrate, "scale-no-migrate", false, "pages/audit_timeline/buffers: do not migrate a reused scale database (read-only use of a shared one)")
	flag.Float64Var(&cfg.HTTPRate, "http-rate", 0, "http: the sessions together start at most this many requests a second (0: as fast as answered); shows whether the work behind the requests keeps up at a given rate")
	flag.BoolVar(&cfg.HTTPGzip, "http-gzip", false, "http: the sessions ask for gzip as browsers do (the server compresses each page; the client's decompression runs on the same cores)")
	flag.BoolVar(&cfg.HTTPScale, "http-scale", false, "http: serve the scale database (10M events / 1M jobs, web only; its writes stay in it) instead of a fresh demo database")
	flag.BoolVar(&cfg.Reseed, "reseed", false, "pages/audit_timeline: rebuild the scale database even if it is big enough")
	flag.IntVar(&cfg.OutboxMsgs, "outbox-msgs", 100_000, "outbox_relay: committed messages relayed in the burn-down")
	flag.IntVar(&cfg.OutboxRate, "outbox-rate", 1000, "outbox_relay: steady-load messages per second")
	flag.DurationVar(&cfg.OutboxDuration, "outbox-duration", 10*time.Second, "outbox_relay: steady-load duration")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the benchmark process to this file")
	flag.Parse()
	cfg.Conns = int32(o.conns)
	if cfg.ClaimBatch <= 0 {
		cfg.ClaimBatch = cfg.Workers
	}
	return cfg, o
}

func run() int {
	cfg, o := parseFlags()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	if o.list {
		for _, b := range registry {
			fmt.Printf("%s\t%s\n", b.ID(), strings.Join(b.systems(), ","))
		}
		return 0
	}
	if o.rounds < 1 || cfg.Jobs < 1 || cfg.Workers < 1 || cfg.InsertBatch < 1 || cfg.LatencyJobs < 1 || o.quiet.threshold < 0 {
		fmt.Fprintln(os.Stderr, "bench: -rounds, -jobs, -workers, -insert-batch and -latency-jobs must be positive, -quiet-load not negative")
		return 2
	}
	benches, err := selectBenches(o.only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}

	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer runAtExit()

	serverURL, cleanup, err := resolveServer(ctx, o.dbURL, o.pgdata, o.embedded)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer cleanup()
	if err := checkLoopback(serverURL); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	env := &Env{Cfg: cfg, ServerURL: serverURL, Log: log}

	dataDir, err := printHeader(ctx, os.Stdout, env, o.rounds, benches)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if o.quiet.threshold > 0 {
		fmt.Printf("# quiet: each run waits up to %s for load1 < %.2f\n", o.quiet.maxWait, o.quiet.threshold)
	}
	pdir := probeDir(dataDir)
	probe := func(when string) { printProbes(ctx, pdir, when, o.pgTest) }
	probe("before")
	results, failed := runRounds(ctx, env, benches, o)
	probe("after")
	printSummaries(benches, results)
	if ctx.Err() != nil {
		fmt.Println("# interrupted")
		return 130
	}
	if failed > 0 {
		fmt.Printf("# %d run(s) failed\n", failed)
		return 1
	}
	return 0
}

// printProbes prints the fsync probe of dir and, with pgTest, pg_test_fsync.
func printProbes(ctx context.Context, dir, when string, pgTest bool) {
	if line, err := fsyncProbe(dir); err != nil {
		fmt.Printf("# fsync probe %s: %v\n", when, err)
	} else {
		fmt.Printf("# fsync probe %s: %s\n", when, line)
	}
	if !pgTest {
		return
	}
	out, err := pgTestFsync(ctx, dir)
	if err != nil {
		fmt.Printf("# pg_test_fsync %s: %v\n", when, err)
		return
	}
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		fmt.Printf("# pg_test_fsync %s: %s\n", when, l)
	}
}

// resultKey names one benchmark's results on one system.
type resultKey struct{ bench, system string }

// runRounds runs every selected benchmark on every system, round after
// round, each run after the quiet gate (when set) and with the load average
// it started at; it returns the results and how many runs failed.
func runRounds(ctx context.Context, env *Env, benches []Bench, o options) (map[resultKey][]Result, int) {
	results := map[resultKey][]Result{}
	failed := 0
	for r := 1; r <= o.rounds && ctx.Err() == nil; r++ {
		for _, b := range benches {
			for _, sys := range b.systems() {
				if !wanted(o.systems, sys) {
					continue
				}
				if ctx.Err() != nil {
					break
				}
				load, loadOK := o.quiet.wait(ctx, os.Stdout, readLoad1, fmt.Sprintf("round %d/%d %s system=%s", r, o.rounds, b.ID(), sys))
				start := time.Now()
				res, err := b.Run(ctx, env, sys)
				if err != nil {
					failed++
					fmt.Printf("# round %d/%d %s system=%s FAILED after %s: %v\n", r, o.rounds, b.ID(), sys, time.Since(start).Round(time.Millisecond), err)
					continue
				}
				res.Load1, res.LoadKnown, res.Round = load, loadOK, r
				k := resultKey{b.ID(), sys}
				results[k] = append(results[k], res)
				var parts []string
				for _, m := range res.Metrics {
					parts = append(parts, m.Key+"="+formatValue(m.Key, m.Value))
				}
				if loadOK {
					parts = append(parts, "load1="+formatLoad(load))
				}
				fmt.Printf("# round %d/%d %s system=%s %s (%s)\n", r, o.rounds, b.ID(), sys, strings.Join(parts, " "), time.Since(start).Round(time.Millisecond))
			}
		}
	}
	return results, failed
}

// printSummaries prints the BENCH line of every benchmark and system, then
// the variants side by side: fairness cost across tenant counts, replica
// scaling, pages under load against quiet.
func printSummaries(benches []Bench, results map[resultKey][]Result) {
	for _, b := range benches {
		for _, sys := range b.systems() {
			if rs := results[resultKey{b.ID(), sys}]; len(rs) > 0 {
				fmt.Println(summaryLine(b.Name, b.Labels, sys, rs))
			}
		}
	}
	type group struct {
		labels []string
		rounds [][]Result
	}
	var order []resultKey
	groups := map[resultKey]*group{}
	for _, b := range benches {
		if b.Labels == "" {
			continue
		}
		for _, sys := range b.systems() {
			k := resultKey{b.Name, sys}
			g, ok := groups[k]
			if !ok {
				g = &group{}
				groups[k] = g
				order = append(order, k)
			}
			g.labels = append(g.labels, b.Labels)
			g.rounds = append(g.rounds, results[resultKey{b.ID(), sys}])
		}
	}
	for _, k := range order {
		if line := variantLine(k.bench, k.system, groups[k].labels, groups[k].rounds); line != "" {
			fmt.Println(line)
		}
	}
}

func wanted(list, sys string) bool {
	if list == "" {
		return true
	}
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == sys {
			return true
		}
	}
	return false
}

// resolveServer picks the server: the given URL, else the machine's
// PostgreSQL on 127.0.0.1:5432 when it answers, else an embedded cluster
// (stopped again by cleanup if this process started it).
func resolveServer(ctx context.Context, given, pgdata string, embedded bool) (string, func(), error) {
	if given != "" && !embedded {
		return given, func() {}, nil
	}
	if !embedded {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if c, err := pgx.Connect(pctx, localServer); err == nil {
			c.Close(ctx)
			return localServer, func() {}, nil
		}
	}
	cl, err := pgcluster.Start(ctx, pgdata, "jejak_bench")
	if err != nil {
		return "", nil, fmt.Errorf("no server at 127.0.0.1:5432 and embedded cluster failed: %w", err)
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", cl.Port)
	return url, func() { _ = cl.Stop(context.Background()) }, nil
}

// printHeader prints when, where and with what the run happens, and returns
// the server's data directory (empty when not readable).
func printHeader(ctx context.Context, w io.Writer, env *Env, rounds int, benches []Bench) (string, error) {
	c, err := pgx.Connect(ctx, env.ServerURL)
	if err != nil {
		return "", fmt.Errorf("connect to server: %w", err)
	}
	defer c.Close(ctx)
	var version string
	if err := c.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		return "", fmt.Errorf("server version: %w", err)
	}
	settings := []string{"fsync", "synchronous_commit", "full_page_writes", "wal_sync_method", "shared_buffers", "max_wal_size", "max_connections"}
	var parts []string
	for _, s := range settings {
		var v string
		if err := c.QueryRow(ctx, "SELECT current_setting($1)", s).Scan(&v); err == nil {
			parts = append(parts, s+"="+v)
		}
	}
	var dataDir string
	_ = c.QueryRow(ctx, "SELECT current_setting('data_directory')").Scan(&dataDir)
	host, _ := os.Hostname()
	redacted := env.ServerURL
	if cfg, err := pgx.ParseConfig(env.ServerURL); err == nil {
		redacted = fmt.Sprintf("%s@%s:%d", cfg.User, cfg.Host, cfg.Port)
	}
	cfg := env.Cfg
	fmt.Fprintf(w, "# jejak bench %s host=%s %s/%s cpus=%d %s\n", time.Now().Format(time.RFC3339), host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	fmt.Fprintf(w, "# server %s data_directory=%s %s\n", redacted, dataDir, version)
	fmt.Fprintf(w, "# settings %s\n", strings.Join(parts, " "))
	fmt.Fprintf(w, "# config rounds=%d jobs=%d workers=%d insert_batch=%d duration=%s warmup=%s backlog=%d poll=%s fetch_cooldown=%s claim_batch=%d conns=%d tenants=%d latency_jobs=%d latency_rate=%d tenants_backlog=%d replica_jobs=%d replica_workers=%d replica_conns=%d replica_warmup=%d\n",
		rounds, cfg.Jobs, cfg.Workers, cfg.InsertBatch, cfg.Duration, cfg.Warmup, cfg.Backlog, cfg.PollInterval, cfg.FetchCooldown, cfg.ClaimBatch, cfg.Conns, cfg.Tenants, cfg.LatencyJobs, cfg.LatencyRate, cfg.TenantsBacklog, cfg.ReplicaJobs, cfg.ReplicaWorkers, cfg.ReplicaConns, cfg.ReplicaWarmup)
	names := make([]string, len(benches))
	for i, b := range benches {
		names[i] = b.ID()
	}
	fmt.Fprintf(w, "# benchmarks %s\n", strings.Join(names, ", "))
	return dataDir, nil
}
