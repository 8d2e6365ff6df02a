package pgcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/pgcluster"
)

// TestClusterKeepsDataAcrossRestarts runs the embedded default end to end:
// initdb on first start, a database created, data written, a clean stop,
// a second start (reusing the data directory) that still has the data, and
// a third Start while running that reuses the live server.
func TestClusterKeepsDataAcrossRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := pgcluster.DataDirForTest(t)

	c, err := pgcluster.Start(ctx, dir, "jejak_try")
	if err != nil {
		t.Fatalf("first start: %v", err)
	}
	exec := func(c *pgcluster.Cluster, sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, c.URL())
		if err != nil {
			t.Fatalf("connect %s: %v", c.URL(), err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(c, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('still here')")

	again, err := pgcluster.Start(ctx, dir, "jejak_try")
	if err != nil || again.Port != c.Port {
		t.Fatalf("start while running must reuse the server: port %d vs %d, %v", again.Port, c.Port, err)
	}
	if err := again.Stop(ctx); err != nil { // not ours: a no-op
		t.Fatal(err)
	}
	exec(c, "SELECT 1") // still running

	if err := c.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "postmaster.pid")); !os.IsNotExist(err) {
		t.Fatalf("server still running after Stop: %v", err)
	}

	// Settings given to a Start that starts the server are the server's,
	// over the defaults (max_connections is one of them).
	c2, err := pgcluster.Start(ctx, dir, "jejak_try", "max_connections=77", "fsync=off")
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer c2.Stop(ctx)
	conn, err := pgx.Connect(ctx, c2.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "still here" {
		t.Fatalf("data after restart: %q %v", v, err)
	}
	var conns, fsync string
	if err := conn.QueryRow(ctx, "SELECT current_setting('max_connections'), current_setting('fsync')").Scan(&conns, &fsync); err != nil || conns != "77" || fsync != "off" {
		t.Fatalf("settings after a start with max_connections=77 fsync=off: %s %s %v", conns, fsync, err)
	}
}

// TestClusterInUnreachableFolder: as root, a checkout the postgres OS user
// cannot reach (a 0700 parent, like /root) still gets a working cluster,
// kept across restarts through the link left at the requested path.
func TestClusterInUnreachableFolder(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Log("not root: the server runs as this user, who can reach the folder")
	}
	ctx := context.Background()
	parent := t.TempDir() // 0700
	dir := filepath.Join(parent, "pg")
	for i := 0; i < 2; i++ {
		c, err := pgcluster.Start(ctx, dir, "jejak_try")
		if err != nil {
			t.Fatalf("start #%d: %v", i+1, err)
		}
		conn, err := pgx.Connect(ctx, c.URL())
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		_, err = conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS t (v int)")
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			t.Cleanup(func() { os.RemoveAll(c.Dir) })
		}
	}
}
