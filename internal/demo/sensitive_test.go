package demo_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/approval"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/kinds"
	"github.com/jejakhq/jejak/internal/payment"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestSeedSensitive: the demo shows a pending approval, a completed
// disable-access and a reconciled double charge with its refund, once.
func TestSeedSensitive(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	sim := payment.NewSimulator(db.System)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	clk := clock.Database{}
	e, err := job.New(job.Config{Pool: db.System, Clock: clk, WorkerID: "demo", Backoff: func(int) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	pay := payment.NewService(db.App, db.System, &payment.HTTPProvider{BaseURL: srv.URL}, e, clk)
	kinds.Register(e, kinds.Deps{App: db.App, System: db.System, Clock: clk, Payments: pay})
	d := demo.SensitiveDeps{System: db.System, Approvals: approval.NewService(db.System, e, clk), Payments: pay}
	for i := 0; i < 2; i++ {
		if err := demo.SeedSensitive(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		if _, err := e.WorkOnce(ctx, 50); err != nil {
			t.Fatal(err)
		}
	}
	count := func(sql string) int {
		var n int
		if err := db.Admin.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for sql, want := range map[string]int{
		`SELECT count(*) FROM approvals WHERE state = 'pending'`:                                                                              1,
		`SELECT count(*) FROM approvals WHERE state = 'approved' AND consumed_at IS NOT NULL`:                                                 1,
		`SELECT count(*) FROM memberships m JOIN users u ON u.id = m.user_id WHERE u.email = 'joko@senja.test' AND m.disabled_at IS NOT NULL`: 1,
		`SELECT count(*) FROM paysim_charges`:                                                                                                 2,
		`SELECT count(*) FROM paysim_refunds`:                                                                                                 1,
		`SELECT count(*) FROM audit_events WHERE action = 'payment.refunded'`:                                                                 1,
	} {
		if n := count(sql); n != want {
			t.Errorf("%s = %d, want %d", sql, n, want)
		}
	}
}
