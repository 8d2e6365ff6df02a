package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/testdb"
)

func TestPprofAddrFromEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr, remote string
		ok           bool
	}{
		{"127.0.0.1:6060", "", true},
		{"localhost:6060", "", true},
		{"[::1]:6060", "", true},
		{"127.0.0.2:0", "", true},
		{"0.0.0.0:6060", "", false},
		{":6060", "", false},
		{"192.0.2.7:6060", "", false},
		{"[::]:6060", "", false},
		{"example.com:6060", "", false},
		{"127.0.0.1", "", false}, // no port
		{"0.0.0.0:6060", "true", true},
		{":6060", "true", true},
		{"0.0.0.0:6060", "false", false},
		{"127.0.0.1:6060", "perhaps", false},
	} {
		env := map[string]string{"JEJAK_PPROF_ADDR": tc.addr, "JEJAK_PPROF_ALLOW_REMOTE": tc.remote}
		c, err := FromEnv(func(k string) string { return env[k] })
		if tc.ok && (err != nil || c.PprofAddr != tc.addr) {
			t.Errorf("JEJAK_PPROF_ADDR=%q ALLOW_REMOTE=%q refused: %v", tc.addr, tc.remote, err)
		}
		if !tc.ok && err == nil {
			t.Errorf("JEJAK_PPROF_ADDR=%q ALLOW_REMOTE=%q accepted", tc.addr, tc.remote)
		}
		if !tc.ok && err != nil && tc.remote == "" && strings.Contains(tc.addr, ":6060") &&
			!strings.Contains(err.Error(), "JEJAK_PPROF_ALLOW_REMOTE") {
			t.Errorf("refusal of %q does not say how to allow it: %v", tc.addr, err)
		}
	}
	if c, err := FromEnv(func(string) string { return "" }); err != nil || c.PprofAddr != "" {
		t.Fatalf("default: %q, %v; want off", c.PprofAddr, err)
	}
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestServePprof: with JEJAK_PPROF_ADDR set, serve answers /debug/pprof/
// on that address, and the dashboard's own address does not.
func TestServePprof(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	pprofAddr, webAddr := freeAddr(t), freeAddr(t)
	env := map[string]string{"DATABASE_URL": db.URL, "JEJAK_PPROF_ADDR": pprofAddr, "JEJAK_ADDR": webAddr,
		"JEJAK_WORKERS": "0", "JEJAK_DB_CONNS": "4", "JEJAK_DATA_DIR": t.TempDir()}
	serveUntilCleanup(t, env)
	code, body := httpStatus("http://" + pprofAddr + "/debug/pprof/")
	if code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("pprof index: %d %.200s", code, body)
	}
	code, body = httpStatus("http://" + pprofAddr + "/debug/pprof/goroutine?debug=1")
	if code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("goroutine profile: %d %.200s", code, body)
	}
	// The dashboard sends a stranger to sign in; it never profiles.
	if code, body := httpStatus("http://" + webAddr + "/debug/pprof/goroutine?debug=1"); strings.Contains(body, "goroutine profile") {
		t.Fatalf("the dashboard serves profiles too: %d", code)
	}
}

// serveUntilCleanup runs Serve with env until the test ends and returns
// once its dashboard answers /healthz.
func serveUntilCleanup(t *testing.T, env map[string]string) {
	t.Helper()
	serveLogging(t, env, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// serveLogging is serveUntilCleanup with serve's log going to log.
func serveLogging(t *testing.T, env map[string]string, log *slog.Logger) {
	t.Helper()
	cfg, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, cfg, log, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := httpStatus("http://" + cfg.Addr + "/healthz")
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dashboard not up: %d %s", code, body)
		}
		select {
		case err := <-served:
			served <- err // for the clean-up, which waits for serve's end
			t.Fatalf("serve ended early: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func httpStatus(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
