package web_test

import (
	"bufio"
	"context"
	"fmt"
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
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/web"
)

// stalledExport starts a download as c over a connection that reads the
// status line and then stops reading, so the server's export blocks
// writing; it returns the status line and the connection.
func stalledExport(t *testing.T, f *fixture, c *client, path string) (string, net.Conn) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(f.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nCookie: %s\r\n\r\n", path, cookieHeader(c, f.srv.URL))
	status, err := bufio.NewReaderSize(conn, 16).ReadString('\n')
	if err != nil {
		t.Fatalf("status line of %s: %v", path, err)
	}
	return status, conn
}

// TestExportsPerUserBounded: one user runs at most two exports at once,
// across sessions and formats; a third gets 429 with Retry-After while
// another user still exports, and once one of the two ends a new one is
// accepted.
func TestExportsPerUserBounded(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	engine, err := job.New(job.Config{Pool: db.System, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	deps := app.NewDeps(db.App, db.System, engine, clock.Database{}, quietLog())
	deps.Audit.UseVerifierKey(logSigner().VerifierKey())
	srv := httptest.NewUnstartedServer(web.New(deps))
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	f := &fixture{t: t, db: db, srv: srv, jobs: engine}
	melati := f.tenantID("toko-bunga-melati")
	if _, err := audit.SeedScale(ctx, db.System, []int64{melati}, 3000, audit.SeedOptions{BatchSize: 3000}); err != nil {
		t.Fatal(err)
	}
	f.seal() // an export holds the sealed log
	const csv, jsonl = "/t/toko-bunga-melati/audit/export.csv", "/t/toko-bunga-melati/audit/export.jsonl"
	budi, budi2, rina := f.client(), f.client(), f.client()
	budi.login("budi@melati.test")
	budi2.login("budi@melati.test")
	rina.login("rina@melati.test")

	first, conn := stalledExport(t, f, budi, csv)
	second, _ := stalledExport(t, f, budi2, jsonl)
	if !strings.Contains(first, "200") || !strings.Contains(second, "200") {
		t.Fatalf("two exports: %q, %q", first, second)
	}
	for _, c := range []*client{budi, budi2} {
		for _, p := range []string{csv, jsonl} {
			if a := c.get(p); a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "10" ||
				a.header.Get("Content-Disposition") != "" {
				t.Fatalf("third export %s: %d Retry-After=%q", p, a.status, a.header.Get("Retry-After"))
			}
		}
	}
	if a := rina.get(csv); a.status != http.StatusOK || strings.Count(a.body, "\n") < 3000 {
		t.Fatalf("another user's export while budi has two: %d, %d lines", a.status, strings.Count(a.body, "\n"))
	}
	// One of budi's downloads ends (the client goes away): a slot frees.
	conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a := budi.get(jsonl)
		if a.status == http.StatusOK {
			break
		}
		if a.status != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("after one export ended: %d", a.status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
