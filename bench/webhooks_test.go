package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestWebhookIsolationSmoke runs webhook_isolation once for a short window
// on a real PostgreSQL: every healthy delivery arrives while the other
// tenant's 40 endpoints hang, and the figures are printed.
func TestWebhookIsolationSmoke(t *testing.T) {
	ctx := context.Background()
	env := webhookSmokeEnv(t, "smokehooks")
	res, err := runWebhookIsolation(ctx, env, "jejak")
	if err != nil {
		t.Fatal(err)
	}
	// How many events fit in the window depends on the machine (under load
	// one round of 41 fan-outs took 460 ms, three rounds in the second);
	// the run itself fails unless every one it sent arrived.
	n, _ := res.Get("deliveries")
	p95, _ := res.Get("p95_ms")
	if n < 1 || !(p95 > 0) {
		t.Fatalf("webhook_isolation: %+v", res.Metrics)
	}
	t.Logf("webhook_isolation: %+v", res.Metrics)
}

// TestWebhookOrderedSmoke runs webhook_ordered both ways on a small
// backlog: every other aggregate's delivery arrives, ordered or not.
func TestWebhookOrderedSmoke(t *testing.T) {
	ctx := context.Background()
	env := webhookSmokeEnv(t, "smokeordered")
	for _, ordered := range []bool{false, true} {
		res, err := runWebhookOrdered(ordered)(ctx, env, "jejak")
		if err != nil {
			t.Fatalf("ordered=%v: %v", ordered, err)
		}
		if n, _ := res.Get("msgs"); n != 90 {
			t.Fatalf("ordered=%v: %v deliveries of other aggregates, want 90", ordered, res.Metrics)
		}
		t.Logf("ordered=%v: %+v", ordered, res.Metrics)
	}
}

// TestWebhookThroughputSmoke runs webhook_throughput for a one-second
// backlog (500 events): every delivery arrives once the engine starts, and
// the CPU figures are read (the backends did some work).
func TestWebhookThroughputSmoke(t *testing.T) {
	ctx := context.Background()
	env := webhookSmokeEnv(t, "smokethroughput")
	res, err := runWebhookThroughput(ctx, env, "jejak")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := res.Get("deliveries")
	rate, _ := res.Get("deliveries_per_sec")
	pg, _ := res.Get("pg_cpu_per_delivery_ms")
	if n != 500 || !(rate > 0) || !(pg > 0) {
		t.Fatalf("webhook_throughput: %+v", res.Metrics)
	}
	t.Logf("webhook_throughput: %+v", res.Metrics)
}

// webhookSmokeEnv is the environment of a webhook line's smoke run: a
// one-second window on the test server, in databases suffixed with name.
func webhookSmokeEnv(t *testing.T, name string) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	return &Env{ServerURL: testServer(t), Log: testLogger(t), DBSuffix: fmt.Sprintf("_%s_%d", name, os.Getpid()), Cfg: Config{
		Duration: time.Second, PollInterval: 20 * time.Millisecond, Conns: 4}}
}
