package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWebhookIsolationSmoke runs webhook_isolation once for a short window
// on a real PostgreSQL: every healthy delivery arrives while the other
// tenant's 40 endpoints hang, and the figures are printed.
func TestWebhookIsolationSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	ctx := context.Background()
	url, cleanup, err := resolveServer(ctx, os.Getenv("BENCH_DATABASE_URL"), filepath.Join(os.TempDir(), "jejak-bench-pg"), false)
	if err != nil {
		t.Fatalf("resolve server: %v", err)
	}
	t.Cleanup(cleanup)
	env := &Env{ServerURL: url, Log: testLogger(t), DBSuffix: fmt.Sprintf("_smokehooks_%d", os.Getpid()), Cfg: Config{
		Duration: time.Second, PollInterval: 20 * time.Millisecond, Conns: 4}}
	res, err := runWebhookIsolation(ctx, env, "jejak")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := res.Get("deliveries")
	p95, _ := res.Get("p95_ms")
	if n < 5 || !(p95 > 0) {
		t.Fatalf("webhook_isolation: %+v", res.Metrics)
	}
	t.Logf("webhook_isolation: %+v", res.Metrics)
}
