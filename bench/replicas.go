package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/app"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
)

// Several replicas: 1, 2 and 4 processes of the real binary (cmd/web,
// workers only) on one PostgreSQL burn down the same backlog of
// points.award jobs, a shipped kind that does real work (a tenant-scoped
// transaction writing a dedup row, a ledger row and a balance). Correctness
// is read from the database afterwards: every job succeeded on its first
// attempt (no failures are injected, so attempt > 1 means a job ran twice),
// and the ledger holds exactly one row per job and the balances their sum.

// replicaCounts are the sizes measured; the smoke test uses its own.
var replicaCounts = []int{1, 2, 4}

func init() {
	for _, n := range replicaCounts {
		register(Bench{Name: "replicas", Labels: fmt.Sprintf("replicas=%d", n), Run: replicasBench(n)})
	}
}

var (
	webOnce sync.Once
	webBin  string
	webErr  error
)

// webBinary builds cmd/web of the repository this bench module sits in
// into a temporary directory, once per process; atExit removes it.
func webBinary(ctx context.Context) (string, error) {
	webOnce.Do(func() {
		root, err := filepath.Abs("..")
		if err != nil {
			webErr = err
			return
		}
		if _, err := os.Stat(filepath.Join(root, "cmd", "web", "main.go")); err != nil {
			webErr = fmt.Errorf("run the benchmark from the bench directory of the repository: %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "jejak-bench-web-")
		if err != nil {
			webErr = err
			return
		}
		atExit(func() { os.RemoveAll(dir) })
		bin := filepath.Join(dir, "web")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/web")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			webErr = fmt.Errorf("build cmd/web: %w\n%s", err, out)
			return
		}
		webBin = bin
	})
	return webBin, webErr
}

var (
	exitMu    sync.Mutex
	exitFuncs []func()
)

// atExit registers clean-up for the end of the program (or the test).
func atExit(f func()) {
	exitMu.Lock()
	defer exitMu.Unlock()
	exitFuncs = append(exitFuncs, f)
}

// runAtExit runs the clean-ups, newest first.
func runAtExit() {
	exitMu.Lock()
	fs := exitFuncs
	exitFuncs = nil
	exitMu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// replica is one running process of the binary.
type replica struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 64<<10 { // keep the start; a failing replica says why early
		return len(p), nil
	}
	return s.b.Write(p)
}

// tail is the last n bytes kept (the buffer keeps the first 64 KiB).
func (s *syncBuffer) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.b.Bytes()
	return string(b[max(len(b)-n, 0):])
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startReplica runs `web serve --workers-only` on databaseURL and the NATS
// server at natsURL with workers worker goroutines, in its own working and
// data directory, with the anchor directory anchors (JEJAK_ANCHOR_DIR) that
// every replica of a deployment shares: its key signs every tenant's log.
func startReplica(bin, databaseURL, natsURL, anchors string, workers int, conns int) (*replica, error) {
	dir, err := os.MkdirTemp("", "jejak-bench-replica-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve")
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"DATABASE_URL=" + databaseURL,
		"NATS_URL=" + natsURL,
		"JEJAK_WORKERS=" + strconv.Itoa(workers),
		"JEJAK_DB_CONNS=" + strconv.Itoa(conns),
		"JEJAK_WORKERS_ONLY=true",
		"JEJAK_DATA_DIR=" + filepath.Join(dir, "data"),
		"JEJAK_ANCHOR_DIR=" + anchors,
		"JEJAK_ADDR=127.0.0.1:0",
		"JEJAK_LOG_LEVEL=warn",
	}
	r := &replica{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = r.out, r.out
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start replica: %w", err)
	}
	go func() {
		r.done <- cmd.Wait()
		os.RemoveAll(dir)
	}()
	return r, nil
}

// stop asks the replica to shut down (SIGTERM: it finishes running jobs)
// and kills it after a grace period.
func (r *replica) stop() error {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() {
			return nil
		}
		return err
	case <-time.After(20 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
		return errors.New("replica did not stop within 20 s; killed")
	}
}

func replicasBench(n int) func(context.Context, *Env, string) (Result, error) {
	return func(ctx context.Context, env *Env, _ string) (Result, error) {
		cfg := env.Cfg
		bin, err := webBinary(ctx)
		if err != nil {
			return Result{}, err
		}
		db, err := env.NewJejakDB(ctx, env.DBName("jejak_bench_replicas"))
		if err != nil {
			return Result{}, err
		}
		defer func() {
			db.Close()
			if err := env.DropDatabase(context.WithoutCancel(ctx), db.Name); err != nil {
				env.Log.Warn("drop database", "database", db.Name, "err", err)
			}
		}()
		ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()

		// One NATS server for all of them, as replicas are deployed: a
		// replica's embedded one would give each its own stream, and the
		// binary warns against it.
		ns, _, _, stopNATS, err := startNATS(ctx)
		defer stopNATS()
		if err != nil {
			return Result{}, fmt.Errorf("nats: %w", err)
		}
		anchors, err := os.MkdirTemp("", "jejak-bench-anchors-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(anchors)
		var reps []*replica
		defer func() {
			for _, r := range reps {
				if err := r.stop(); err != nil {
					env.Log.Warn("stop replica", "err", err, "output", r.out.String())
				}
			}
		}()
		// Unless told, each replica's pools are sized as docs/scaling.md
		// sizes a cluster's: about 16 pooled sessions of all replicas per
		// database core (the database shares this machine), serve's
		// default at most and the least serve accepts at least, and within
		// max_connections (100 here) beside the benchmark's own. On two
		// cores that is 8, 8 and 4 for 1, 2 and 4 replicas. Fewer sessions
		// cost the database less CPU; with its pools of 4 a replica's
		// sealer once waited for a system connection behind the claims
		// (the seal delay's p99 over a second in 6 of 21 runs), and has
		// a pool of its own since (docs/benchmarks.md, 2026-12-07 11:45).
		conns := max(4, min(app.DefaultDBConns, 16*runtime.NumCPU()/(2*n)))
		for conns > 4 && n*app.ReplicaSessions(conns) > 90 {
			conns--
		}
		if cfg.ReplicaConns > 0 {
			conns = cfg.ReplicaConns
		}
		for range n {
			r, err := startReplica(bin, db.URL, ns.ClientURL(), anchors, cfg.ReplicaWorkers, conns)
			if err != nil {
				return Result{}, err
			}
			reps = append(reps, r)
		}
		if err := waitReplicas(ctx, db, reps); err != nil {
			return Result{}, err
		}

		eng, err := job.New(job.Config{Pool: db.System, Logger: env.Log})
		if err != nil {
			return Result{}, err
		}
		// Unmeasured jobs first: a replica opens its pools' connections as
		// work needs them, and each new backend forks, fills its caches and
		// prepares its statements. Over a burn-down of a few seconds that
		// start-up, not the jobs, was much of what extra replicas cost.
		if cfg.ReplicaWarmup > 0 {
			if err := enqueueAwards(ctx, db, eng, "warm-", cfg.ReplicaWarmup); err != nil {
				return Result{}, err
			}
			if _, err := waitFinished(ctx, unfinishedJobs{db}); err != nil {
				return Result{}, fmt.Errorf("warm-up: %w (replica output: %s)", err, reps[0].out.String())
			}
			// The measured jobs start with every warm-up event published.
			if _, err := waitFinished(ctx, unpublishedEvents(db)); err != nil {
				return Result{}, fmt.Errorf("warm-up: %w (replica output: %s)", err, reps[0].out.String())
			}
		}
		// What the burn-down costs: the replicas' CPU and that of
		// PostgreSQL's backends of this database, and its statements,
		// from the enqueue to the last job's end; and what is left: the
		// machine's idle time (none when the cores are the limit) and
		// this process's CPU.
		statements := statementsAvailable(ctx, db.Admin)
		before, err := readCounters(ctx, db.Admin, statements, reps...)
		if err != nil {
			return Result{}, err
		}
		if err := enqueueAwards(ctx, db, eng, "bench-", cfg.ReplicaJobs); err != nil {
			return Result{}, err
		}
		start := time.Now()
		finished, err := waitFinished(ctx, unfinishedJobs{db})
		if err != nil {
			return Result{}, fmt.Errorf("%w (replica output: %s)", err, reps[0].out.String())
		}
		elapsed := finished.Sub(start)
		after, err := readCounters(ctx, db.Admin, statements, reps...)
		if err != nil {
			return Result{}, err
		}
		used := after.sub(before)
		// What the relays had not yet published when the last job ended,
		// and when they had published every award's event: a job's work is
		// done only then, and a relay that falls behind makes every later
		// claim walk more.
		backlog, err := unpublishedEvents(db).Unfinished(ctx)
		if err != nil {
			return Result{}, err
		}
		published, err := waitFinished(ctx, unpublishedEvents(db))
		if err != nil {
			return Result{}, err
		}
		seal, gaps, err := sealDelays(ctx, db, start)
		if err != nil {
			return Result{}, err
		}

		var c struct{ jobs, firstTry, retried, notSucceeded, workers, ledger, balance int64 }
		err = db.Admin.QueryRow(ctx, `SELECT count(*),
				count(*) FILTER (WHERE state = 'succeeded' AND attempt = 1),
				count(*) FILTER (WHERE attempt > 1),
				count(*) FILTER (WHERE state <> 'succeeded'),
				count(DISTINCT worker_id) FILTER (WHERE payload->>'message_id' LIKE 'bench-%'),
				(SELECT count(*) FROM points_ledger),
				(SELECT coalesce(sum(balance), 0) FROM points_balances)
			FROM jobs WHERE kind = 'points.award'`).
			Scan(&c.jobs, &c.firstTry, &c.retried, &c.notSucceeded, &c.workers, &c.ledger, &c.balance)
		if err != nil {
			return Result{}, fmt.Errorf("read outcome: %w", err)
		}
		want := int64(cfg.ReplicaJobs)
		if all := want + int64(cfg.ReplicaWarmup); c.jobs != all || c.firstTry != all || c.ledger != all || c.balance != all {
			// Why the repeated ones ran again: each earlier attempt's error.
			var why string
			_ = db.Admin.QueryRow(ctx, `SELECT coalesce(string_agg(DISTINCT left(e->>'error', 160), ' | '), '')
				FROM jobs, jsonb_array_elements(errors) e WHERE kind = 'points.award' AND attempt > 1`).Scan(&why)
			return Result{}, fmt.Errorf("correctness: %d jobs, %d succeeded on the first attempt, %d ran more than once, %d not succeeded, %d ledger rows, balance sum %d; want %d each and none run twice (earlier attempts ended: %s)",
				c.jobs, c.firstTry, c.retried, c.notSucceeded, c.ledger, c.balance, all, why)
		}
		return Result{Metrics: []Metric{
			{"jobs_per_sec", float64(want) / elapsed.Seconds()},
			{"seconds", elapsed.Seconds()},
			{"jobs", float64(want)},
			{"run_twice", float64(c.retried)},
			{"workers_used", float64(c.workers)},
			{"replica_cpu_per_job_ms", used.webCPU.Seconds() * 1000 / float64(want)},
			{"pg_cpu_per_job_ms", used.pgCPU.Seconds() * 1000 / float64(want)},
			{"bench_cpu_per_job_ms", used.benchCPU.Seconds() * 1000 / float64(want)},
			{"idle_pct", 100 * used.machine.idleShare()},
			{statementsMetric(statements, "job"), float64(used.statements) / float64(want)},
			{"outbox_backlog", float64(backlog)},
			{"published_per_sec", float64(want) / published.Sub(start).Seconds()},
			{"seal_p50_ms", seal.p50},
			{"seal_p99_ms", seal.p99},
			{"seal_gap_p50_ms", gaps.p50},
			{"seal_gap_p99_ms", gaps.p99},
		}}, nil
	}
}

// enqueueAwards enqueues n points.award jobs spread over the tenants in
// one transaction, so that every replica sees them all at once; message
// ids start with prefix.
func enqueueAwards(ctx context.Context, db *JejakDB, eng *job.Engine, prefix string, n int) error {
	ps := make([]job.EnqueueParams, n)
	for i := range ps {
		t := db.Tenants[i%len(db.Tenants)]
		p, _ := json.Marshal(map[string]any{
			"tenant_id": t, "message_id": prefix + strconv.Itoa(i),
			"customer": "c" + strconv.Itoa(i%500) + "@bench.test", "points": 1, "reason": "bench",
		})
		ps[i] = job.EnqueueParams{TenantID: t, Kind: "points.award", Payload: p, MaxAttempts: 5}
	}
	if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error {
		_, err := eng.EnqueueMany(ctx, tx, ps)
		return err
	}); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	return nil
}

// waitReplicas waits until every replica's engine has registered in
// job_workers, failing early when one exits.
func waitReplicas(ctx context.Context, db *JejakDB, reps []*replica) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		for _, r := range reps {
			select {
			case err := <-r.done:
				r.done <- err
				return fmt.Errorf("replica exited at start (%v): %s", err, r.out.String())
			default:
			}
		}
		var up int
		if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM job_workers WHERE capacity > 0`).Scan(&up); err != nil {
			return fmt.Errorf("count replicas: %w", err)
		}
		if up >= len(reps) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d replicas registered: %w", up, len(reps), ctx.Err())
		case <-t.C:
		}
	}
}

// rowsLeft adapts a count over a Jejak database to waitFinished: what
// it counts is what is still to be done.
type rowsLeft struct {
	db          *JejakDB
	what, count string
}

// unpublishedEvents counts the outbox messages not yet delivered (over the
// partial index of undelivered messages); unsealedEvents the audit
// events waiting in the sealer's queue.
func unpublishedEvents(db *JejakDB) rowsLeft {
	return rowsLeft{db, "unpublished events", `SELECT count(*) FROM outbox_messages WHERE state <> 'delivered'`}
}

func unsealedEvents(db *JejakDB) rowsLeft {
	return rowsLeft{db, "unsealed events", `SELECT count(*) FROM audit_unsealed`}
}

func (r rowsLeft) Unfinished(ctx context.Context) (int64, error) {
	var n int64
	// Counted through the queues' indexes: planned from whatever
	// statistics the table had, the outbox's count once scanned the whole
	// table (24,600 buffers a poll) while the relay drained the backlog it
	// measures.
	err := database.InTx(ctx, r.db.Admin, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
			return err
		}
		return tx.QueryRow(ctx, r.count).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", r.what, err)
	}
	return n, nil
}

// sealDelays waits until every audit event is sealed and returns the p50
// and p99 of how long the events written since since waited for it, in ms:
// from their transaction's start (occurred_at, the writer's now()) to the
// sealing transaction's (the leaf's sealed_at), as the replicas' own
// jejak_audit_seal_delay_seconds measures it, which the benchmark cannot
// read (each replica keeps its histogram in its own process).
//
// The gaps are between one tenant's consecutive sealing transactions (the
// distinct sealed_at of its leaves), p50 and p99 in ms: how often a
// tenant's events were taken, which tells a slow sealer from writers whose
// own transactions were long.
func sealDelays(ctx context.Context, db *JejakDB, since time.Time) (d, gaps percentiles, err error) {
	if _, err := waitFinished(ctx, unsealedEvents(db)); err != nil {
		return d, gaps, err
	}
	err = db.Admin.QueryRow(ctx, `SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY d), 0),
			coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY d), 0)
		FROM (SELECT extract(epoch FROM l.sealed_at - e.occurred_at) * 1000 AS d
		        FROM audit_sealed e JOIN audit_leaves l ON l.tenant_id = e.tenant_id AND l.event_id = e.id
		       WHERE e.occurred_at >= $1) s`, since).Scan(&d.p50, &d.p99)
	if err != nil {
		return d, gaps, fmt.Errorf("seal delays: %w", err)
	}
	err = db.Admin.QueryRow(ctx, `SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY g), 0),
			coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY g), 0)
		FROM (SELECT extract(epoch FROM b.at - lag(b.at) OVER (PARTITION BY b.tenant_id ORDER BY b.at)) * 1000 AS g
		        FROM (SELECT DISTINCT l.tenant_id, l.sealed_at AS at
		                FROM audit_sealed e JOIN audit_leaves l ON l.tenant_id = e.tenant_id AND l.event_id = e.id
		               WHERE e.occurred_at >= $1) b) x
		WHERE g IS NOT NULL`, since).Scan(&gaps.p50, &gaps.p99)
	if err != nil {
		return d, gaps, fmt.Errorf("seal batch gaps: %w", err)
	}
	return d, gaps, nil
}

// percentiles are a p50 and a p99 in ms.
type percentiles struct{ p50, p99 float64 }
