package chaos_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/chaos"
	"github.com/jejakhq/jejak/internal/pgcluster"
)

// The run's shape; JEJAK_CHAOS_JOBS scales it (make chaos: 20,000).
const (
	replicas  = 3
	workers   = 8
	lease     = 3 * time.Second
	heartbeat = time.Second
	jobSleep  = 10 // ms of work per job
	tenants   = 5
)

// TestChaos runs several replicas of the real binary (built from
// cmd/web) on one database of its own embedded cluster, feeds them
// chaos.count jobs in four waves and, during each wave, injects a fault:
// kill -9 of a replica (restarted), an immediate (crash-like) PostgreSQL
// restart, a network cut between one replica and the database (a proxy
// that drops its connections and refuses new ones for two leases), and
// kill -9 of another replica (not restarted). It then waits for the queue
// to drain and asserts: every job succeeded (none lost, none dead),
// nothing is left running, every effect was applied exactly once (a
// re-run found its key already processed and applied nothing), and the
// queue drained within 30 s of the last fault.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos suite: builds the binary and runs replicas")
	}
	n := 1200
	if v := os.Getenv("JEJAK_CHAOS_JOBS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 8 {
			t.Fatalf("JEJAK_CHAOS_JOBS=%q", v)
		}
	}
	ctx := context.Background()
	began := time.Now()
	base, err := os.MkdirTemp("", "jejak-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(base, "web")
	build := exec.Command("go", "build", "-o", bin, "./cmd/web")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build cmd/web: %v\n%s", err, out)
	}

	// Our own cluster: it is restarted below, so never the shared server.
	cluster, err := pgcluster.Start(ctx, filepath.Join(base, "pg"), "jejak")
	if err != nil {
		t.Fatalf("embedded cluster: %v", err)
	}
	t.Cleanup(func() { _ = cluster.Stop(context.Background()) })
	dbURL := cluster.URL()
	if out, err := exec.Command(bin, "migrate", "--database-url", dbURL, "--data-dir", base).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	admin, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	if _, err := admin.Exec(ctx, chaos.EffectsTable); err != nil {
		t.Fatal(err)
	}
	for i := range tenants {
		if _, err := admin.Exec(ctx, "INSERT INTO tenants (slug, name) VALUES ($1, $1)", fmt.Sprintf("chaos-%d", i)); err != nil {
			t.Fatal(err)
		}
	}

	px := newProxy(t, fmt.Sprintf("127.0.0.1:%d", cluster.Port))
	proxiedURL := fmt.Sprintf("postgres://postgres@%s/jejak?sslmode=disable", px.addr())
	procs := make([]*exec.Cmd, replicas)
	// One anchor directory for all, as a deployment shares it: its key
	// signs every tenant's log, and a replica restarted with a key of its
	// own would refuse to start.
	anchors := filepath.Join(base, "anchors")
	start := func(i int) {
		url := dbURL
		if i == replicas-1 {
			url = proxiedURL // the replica whose network is cut
		}
		dir := filepath.Join(base, fmt.Sprintf("replica-%d", i))
		_ = os.MkdirAll(dir, 0o755)
		logf, err := os.OpenFile(filepath.Join(dir, "log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "serve", "--workers-only")
		cmd.Env = append(os.Environ(), "DATABASE_URL="+url, "JEJAK_DATA_DIR="+dir, "JEJAK_ANCHOR_DIR="+anchors,
			"JEJAK_WORKERS="+strconv.Itoa(workers), "JEJAK_LEASE="+lease.String(), "JEJAK_HEARTBEAT="+heartbeat.String(),
			"JEJAK_CHAOS_KIND=true", "JEJAK_LOG_LEVEL=warn")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = cmd
	}
	kill := func(i int) {
		if procs[i] == nil {
			return
		}
		_ = procs[i].Process.Signal(syscall.SIGKILL)
		_ = procs[i].Wait()
		procs[i] = nil
	}
	t.Cleanup(func() {
		for i, p := range procs {
			if p == nil {
				continue
			}
			// A failed run: every live replica writes its goroutines to
			// its log and exits, so a replica that stopped working shows
			// where it waits.
			if t.Failed() {
				_ = p.Process.Signal(syscall.SIGQUIT)
			} else {
				_ = p.Process.Signal(syscall.SIGTERM)
			}
			done := make(chan struct{})
			go func() { _ = p.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				kill(i)
			}
		}
		if t.Failed() {
			for i := range replicas {
				b, _ := os.ReadFile(filepath.Join(base, fmt.Sprintf("replica-%d", i), "log"))
				t.Logf("replica %d log tail:\n%s", i, failedReplicaLog(b))
			}
		}
	})
	for i := range replicas {
		start(i)
	}

	wave := n / 4
	enqueue := func(from, to int) {
		t.Helper()
		retry(t, func() error {
			_, err := admin.Exec(ctx, `
				INSERT INTO jobs (tenant_id, kind, payload, max_attempts, available_at, created_at, trace_id, requested_at, payload_hash)
				SELECT t.ids[1 + g % cardinality(t.ids)], $3, jsonb_build_object('key', 'k' || g, 'sleep_ms', $4::int),
				       10, now(), now(), md5('chaos' || g), now(), '\x00'
				  FROM generate_series($1::int, $2::int) g, (SELECT array_agg(id ORDER BY id) AS ids FROM tenants) t`,
				from, to, chaos.Kind, jobSleep)
			return err
		})
	}
	// Only the chaos jobs count: the binary's own scheduled kinds run too.
	type counts struct{ succeeded, dead, running, pending int }
	progress := func() counts {
		var c counts
		retry(t, func() error {
			return admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'dead'),
				count(*) FILTER (WHERE state = 'running'), count(*) FILTER (WHERE state = 'pending')
				FROM jobs WHERE kind = $1`, chaos.Kind).
				Scan(&c.succeeded, &c.dead, &c.running, &c.pending)
		})
		return c
	}
	waitSucceeded := func(k int) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute)
		for progress().succeeded < k {
			if time.Now().After(deadline) {
				t.Fatalf("stuck before %d jobs succeeded: %+v", k, progress())
			}
			time.Sleep(50 * time.Millisecond) //nolint:forbidigo // polling with a deadline
		}
	}

	faults := 0
	// 1: kill -9 of a replica, restarted at once.
	enqueue(1, wave)
	waitSucceeded(wave / 2)
	kill(0)
	start(0)
	faults++
	// 2: PostgreSQL crashes and comes back.
	enqueue(wave+1, 2*wave)
	waitSucceeded(wave + wave/2)
	if err := cluster.Restart(ctx); err != nil {
		t.Fatalf("restart PostgreSQL: %v", err)
	}
	faults++
	// 3: the last replica loses the database for two leases.
	enqueue(2*wave+1, 3*wave)
	waitSucceeded(2*wave + wave/2)
	px.cut()
	time.Sleep(2 * lease) //nolint:forbidigo // the length of the outage is the fault
	px.restore()
	faults++
	// 4: kill -9 of another replica, not restarted.
	enqueue(3*wave+1, n)
	waitSucceeded(3*wave + wave/4)
	kill(1)
	faults++
	lastFault := time.Now()

	deadline := time.Now().Add(3 * time.Minute)
	var c counts
	for c = progress(); c.succeeded+c.dead < n; c = progress() {
		if time.Now().After(deadline) {
			t.Fatalf("queue did not drain: %+v of %d", c, n)
		}
		time.Sleep(50 * time.Millisecond) //nolint:forbidigo // polling with a deadline
	}
	drain := time.Since(lastFault)

	var applied, distinct, redelivered, processed int
	if err := admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE NOT deduped), count(DISTINCT key) FILTER (WHERE NOT deduped),
		count(*) FILTER (WHERE deduped), (SELECT count(*) FROM processed_messages WHERE consumer = $1) FROM chaos_effects`,
		chaos.Kind).Scan(&applied, &distinct, &redelivered, &processed); err != nil {
		t.Fatal(err)
	}
	lost, duplicated := n-c.succeeded, applied-distinct
	summary := fmt.Sprintf("jobs=%d replicas=%d faults=%d lost=%d dead=%d duplicated=%d redelivered=%d drain=%.1fs total=%.1fs",
		n, replicas, faults, lost, c.dead, duplicated, redelivered, drain.Seconds(), time.Since(began).Seconds())
	t.Log("chaos: " + summary)
	if path := os.Getenv("JEJAK_CHAOS_REPORT"); path != "" {
		_ = os.WriteFile(path, []byte(summary+"\n"), 0o644)
	}
	if lost != 0 || c.dead != 0 || c.running != 0 || c.pending != 0 {
		t.Errorf("not every job finished: %+v of %d", c, n)
	}
	if applied != n || distinct != n || processed != n {
		t.Errorf("effects: %d applied, %d distinct keys, %d processed; want %d each (exactly once)", applied, distinct, processed, n)
	}
	if drain > 30*time.Second {
		t.Errorf("drained %s after the last fault, want within 30s", drain.Round(100*time.Millisecond))
	}
}

// retry runs f until it succeeds, for up to a minute: the suite's own
// queries must ride out the PostgreSQL restart it causes.
func retry(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) //nolint:forbidigo // polling with a deadline
	}
}

// proxy forwards TCP to target; cut drops every connection and refuses
// new ones until restore, like a firewall rejecting the replica's traffic.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// failedReplicaLog is what a failed run shows of a replica's log: its last
// lines and, for a replica alive at the end, the goroutine dump SIGQUIT
// made, less the idle job workers' goroutines (dozens of one stack).
func failedReplicaLog(b []byte) string {
	lines, dump, dumped := strings.Cut(string(b), "SIGQUIT: quit")
	if len(lines) > 4000 {
		lines = lines[len(lines)-4000:]
	}
	if !dumped {
		return lines
	}
	var kept []string
	idle := 0
	for _, g := range strings.Split(dump, "\n\n") {
		if strings.Contains(g, "internal/job.(*Engine).worker(") {
			idle++
			continue
		}
		kept = append(kept, g)
	}
	out := strings.Join(kept, "\n\n")
	if len(out) > 96<<10 {
		out = out[:96<<10] + "\n[…]"
	}
	return fmt.Sprintf("%s\nSIGQUIT: goroutines, %d idle job workers left out:%s", lines, idle, out)
}
