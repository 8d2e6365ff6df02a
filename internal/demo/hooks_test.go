package demo_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/webhook"
)

// The demo's receiver verifies real deliveries with the endpoint's secret
// (sealed in the table, as serve keeps it); its flaky endpoint answers 503
// so deliveries retry.
func TestDemoHookReceiverVerifiesDeliveries(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	key, err := webhook.LoadSealer(filepath.Join(t.TempDir(), "webhook-secrets.key"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := demo.StartHookReceiver(db.System, key, log)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for range 2 { // idempotent
		if err := h.SeedEndpoints(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := webhook.SealStored(ctx, db.System, key); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Admin.QueryRow(ctx, "SELECT count(*) FROM webhook_endpoints WHERE secret LIKE 'jejak-sealed:%'").Scan(&n); err != nil || n != 2*len(demo.Tenants) {
		t.Fatalf("%d demo endpoints, want %d (%v)", n, 2*len(demo.Tenants), err)
	}
	e, err := job.New(job.Config{Pool: db.System, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	var tid int64
	_ = db.Admin.QueryRow(ctx, "SELECT id FROM tenants WHERE slug = 'kopi-senja'").Scan(&tid)
	fan := &webhook.Fanout{System: db.System, Jobs: e, Logger: log}
	if c, err := fan.HandleEvent(ctx, tid, 5, "project.created", []byte(`{"id":"evt_5"}`), ""); err != nil || c != 2 {
		t.Fatalf("fan-out: %d %v", c, err)
	}
	d := &webhook.Deliverer{App: db.App, Jobs: e, Logger: log, Sealer: key,
		Client: webhook.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}.Client()}
	jobs, err := e.Claim(ctx, "w", 10)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claim: %d %v", len(jobs), err)
	}
	for _, j := range jobs {
		if err := d.Handle(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	var ok, retrying int
	_ = db.Admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'pending' AND last_status = 503)
		FROM webhook_deliveries`).Scan(&ok, &retrying)
	if ok != 1 || retrying != 1 {
		t.Fatalf("deliveries: %d succeeded, %d retrying", ok, retrying)
	}
	resp, err := http.Get(h.URL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "/hooks/kopi-senja") || strings.Contains(string(b), "NOT verified") || !strings.Contains(string(b), "verified") {
		t.Fatalf("receiver page: %s", b)
	}
}
