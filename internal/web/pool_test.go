package web_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/app"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/web"
)

// tinyPoolFixture serves the dashboard with a tenant pool of ONE
// connection, so any request that holds a connection blocks every other.
func tinyPoolFixture(t *testing.T, timeouts *web.Timeouts, ln net.Listener) (*fixture, *testdb.DB) {
	t.Helper()
	db := testdb.New(t)
	ctx := context.Background()
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	tiny, err := database.Open(ctx, db.URL, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tiny.Close)
	engine, err := job.New(job.Config{Pool: db.System, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	deps := app.NewDeps(tiny, db.System, engine, clock.Database{}, quietLog())
	deps.Timeouts = timeouts
	srv := httptest.NewUnstartedServer(web.New(deps))
	if ln != nil {
		srv.Listener.Close()
		srv.Listener = ln
	}
	srv.Start()
	t.Cleanup(srv.Close)
	f := &fixture{t: t, db: db, srv: srv, jobs: engine}
	return f, db
}

// smallBuffers makes accepted connections' send buffers small, so a client
// that stops reading blocks the server's writes after a few kilobytes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

func cookieHeader(c *client, base string) string {
	var parts []string
	for _, ck := range c.http.Jar.Cookies(mustURL(base)) {
		parts = append(parts, ck.Name+"="+ck.Value)
	}
	return strings.Join(parts, "; ")
}

// An owner downloading a large export over a client that stops reading
// holds no pool connection: another tenant's page still answers at once
// with a one-connection pool.
func TestSlowExportDoesNotHoldThePool(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, db := tinyPoolFixture(t, nil, smallBuffers{ln})
	melati := f.tenantID("toko-bunga-melati")
	if _, err := audit.SeedScale(context.Background(), db.System, []int64{melati}, 6000, audit.SeedOptions{BatchSize: 2000}); err != nil {
		t.Fatal(err)
	}
	budi, sari := f.client(), f.client()
	budi.login("budi@melati.test")
	sari.login("sari@senja.test")

	// A slow reader: a tiny receive window, reads the status line only.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
	}}
	conn, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /t/toko-bunga-melati/audit/export.jsonl HTTP/1.1\r\nHost: x\r\nCookie: %s\r\n\r\n", cookieHeader(budi, f.srv.URL))
	status, err := bufio.NewReaderSize(conn, 16).ReadString('\n')
	if err != nil || !strings.Contains(status, "200") {
		t.Fatalf("export status line %q: %v", status, err)
	}
	// The export is now stalled writing to a client that does not read.
	// Another tenant's owner, at the same time:
	done := make(chan answer, 1)
	go func() { done <- sari.get("/t/kopi-senja/") }()
	select {
	case a := <-done:
		if a.status != http.StatusOK {
			t.Fatalf("other tenant's home: %d", a.status)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("another tenant's page waited more than 5 s behind a stalled export")
	}
}

// With the pool exhausted, a request waits at most its deadline for a
// connection and answers 503 with Retry-After instead of piling up.
func TestPoolAcquireDeadlineAnswers503(t *testing.T) {
	t.Parallel()
	to := web.DefaultTimeouts
	to.Request = 300 * time.Millisecond
	db := testdb.New(t)
	ctx := context.Background()
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	tiny, err := database.Open(ctx, db.URL, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tiny.Close()
	engine, err := job.New(job.Config{Pool: db.System, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	// Sign in at a replica with the default deadline (hashing a password
	// takes longer than the tight one), then use the session at a replica
	// whose requests may wait only 300 ms (cookies do not depend on the
	// port).
	deps := app.NewDeps(tiny, db.System, engine, clock.Database{}, quietLog())
	loose := httptest.NewServer(web.New(deps))
	defer loose.Close()
	deps.Timeouts = &to
	srv := httptest.NewServer(web.New(deps))
	defer srv.Close()
	f := &fixture{t: t, db: db, srv: loose, jobs: engine}
	c := f.client()
	c.login("budi@melati.test")
	f.srv = srv

	held, err := tiny.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release() // a failure below must not leave tiny.Close waiting for it
	// The answer must come while the only connection is still held: a
	// request that waited for it instead would hang until the client's
	// timeout and fail the test. That timeout is half the default request
	// deadline, so only the replica's own 300 ms deadline can answer in
	// time; it is not a speed budget (33 times the deadline).
	c.http.Timeout = web.DefaultTimeouts.Request / 2
	start := time.Now()
	a := c.get("/t/toko-bunga-melati/")
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
		t.Fatalf("exhausted pool: %d Retry-After=%q, want 503", a.status, a.header.Get("Retry-After"))
	}
	// It gave up at its deadline, not before (a 503 that did not wait
	// would be another fault).
	if d := time.Since(start); d < to.Request {
		t.Fatalf("503 after %s, before the %s request deadline", d, to.Request)
	}
	held.Release()
	// The connection serves again: at once on the replica with the
	// default deadline, and on the tight one as soon as one of its
	// requests fits in 300 ms (a loaded machine may need a few tries).
	f.srv = loose
	if a := c.get("/t/toko-bunga-melati/"); a.status != http.StatusOK {
		t.Fatalf("after release: %d", a.status)
	}
	f.srv = srv
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(time.Minute); ; <-tick.C {
		a := c.get("/t/toko-bunga-melati/")
		if a.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tight replica still answers %d a minute after the release", a.status)
		}
	}
}

// A download whose client stops reading is cut off after StreamWrite
// without progress, rather than holding its goroutine and connection.
func TestStalledExportIsCutOff(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	to := web.DefaultTimeouts
	to.StreamWrite = 300 * time.Millisecond
	db := testdb.New(t)
	ctx := context.Background()
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	engine, err := job.New(job.Config{Pool: db.System, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	deps := app.NewDeps(db.App, db.System, engine, clock.Database{}, slog.New(slog.NewJSONHandler(logs, nil)))
	deps.Timeouts = &to
	srv := httptest.NewUnstartedServer(web.New(deps))
	srv.Listener.Close()
	srv.Listener = smallBuffers{ln}
	srv.Start()
	defer srv.Close()
	f := &fixture{t: t, db: db, srv: srv, jobs: engine}
	melati := f.tenantID("toko-bunga-melati")
	if _, err := audit.SeedScale(ctx, db.System, []int64{melati}, 6000, audit.SeedOptions{BatchSize: 2000}); err != nil {
		t.Fatal(err)
	}
	f.seal() // the export holds the sealed log
	budi := f.client()
	budi.login("budi@melati.test")
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
	}}
	conn, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /t/toko-bunga-melati/audit/export.jsonl HTTP/1.1\r\nHost: x\r\nCookie: %s\r\n\r\n", cookieHeader(budi, f.srv.URL))
	// Not reading: the server must give up on its own.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(strings.Join(logs.errors(), "\n"), "audit export failed") {
		if time.Now().After(deadline) {
			t.Fatal("a stalled export was not cut off within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
