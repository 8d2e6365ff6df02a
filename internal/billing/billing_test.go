package billing_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/billing"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
)

var jakarta = time.FixedZone("WIB", 7*3600)

func at(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02 15:04", s, jakarta)
	if err != nil {
		panic(err)
	}
	return t
}

type fixture struct {
	db    *testdb.DB
	clock *clock.Frozen
	svc   *billing.Service
	h     *billing.SweepHandler
	user  int64
}

func setup(t *testing.T) *fixture {
	t.Helper()
	db := testdb.New(t)
	ctx := context.Background()
	_, err := db.Admin.Exec(ctx, `INSERT INTO plans (code, name, price_idr, max_projects) VALUES
		('basic', 'Basic', 0, 3), ('pro', 'Pro', 99000, 20), ('business', 'Business', 499000, 100)`)
	if err != nil {
		t.Fatalf("seed plans: %v", err)
	}
	var user int64
	if err := db.Admin.QueryRow(ctx, `INSERT INTO users (email, name, password_hash) VALUES ('budi@example.com', 'Budi', 'x') RETURNING id`).Scan(&user); err != nil {
		t.Fatalf("seed user: %v", err)
	}
	c := clock.NewFrozen(at("2026-02-01 09:00"))
	svc := billing.NewService(c)
	return &fixture{db: db, clock: c, svc: svc, user: user,
		h: &billing.SweepHandler{App: db.App, System: db.System, Service: svc}}
}

func (f *fixture) tenant(t *testing.T, slug string) int64 {
	t.Helper()
	var id int64
	if err := f.db.Admin.QueryRow(context.Background(), `INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id`, slug).Scan(&id); err != nil {
		t.Fatalf("create tenant: %v", err)
	}
	return id
}

func (f *fixture) subscribe(t *testing.T, tenantID int64, plan string) (billing.Subscription, billing.Change) {
	t.Helper()
	var sub billing.Subscription
	var ch billing.Change
	err := database.InTenantTx(context.Background(), f.db.App, tenantID, func(tx pgx.Tx) error {
		var err error
		sub, ch, err = f.svc.Subscribe(context.Background(), tx, tenantID, plan, &f.user)
		return err
	})
	if err != nil {
		t.Fatalf("subscribe %s: %v", plan, err)
	}
	return sub, ch
}

func (f *fixture) get(t *testing.T, tenantID int64) (billing.Subscription, []billing.StatusChange) {
	t.Helper()
	var sub billing.Subscription
	var hist []billing.StatusChange
	err := database.InTenantTx(context.Background(), f.db.App, tenantID, func(tx pgx.Tx) error {
		var err error
		if sub, err = billing.Get(context.Background(), tx, tenantID); err != nil {
			return err
		}
		hist, err = billing.ListStatusChanges(context.Background(), tx, tenantID)
		return err
	})
	if err != nil {
		t.Fatalf("read subscription: %v", err)
	}
	return sub, hist
}

func sweepJob(id, tenantID int64, p any) *job.Job {
	raw, _ := json.Marshal(p)
	return &job.Job{ID: id, TenantID: tenantID, Kind: billing.SweepKind, Payload: raw, Attempt: 1, MaxAttempts: 3}
}

// The seed's walkthrough: subscribe on 2026-02-01 09:00 (period ends
// 2026-03-03 09:00), then sweep as the weeks pass.
func TestSweepFollowsSeedTimeline(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	tenant := f.tenant(t, "toko-budi")

	sub, _ := f.subscribe(t, tenant, "pro")
	if !sub.PeriodEnd.Equal(at("2026-03-03 09:00")) || !sub.PeriodStart.Equal(at("2026-02-01 09:00")) {
		t.Fatalf("period %s – %s, want 2026-02-01 09:00 – 2026-03-03 09:00", sub.PeriodStart, sub.PeriodEnd)
	}

	steps := []struct {
		now     string
		want    billing.Status
		changes int // status history rows so far
	}{
		{"2026-02-15 09:00", billing.StatusActive, 0},
		{"2026-03-03 08:59", billing.StatusActive, 0},
		{"2026-03-03 09:00", billing.StatusGrace, 1},
		{"2026-03-05 09:00", billing.StatusGrace, 1}, // the seed's worker run: grace
		{"2026-03-10 08:59", billing.StatusGrace, 1},
		{"2026-03-10 09:00", billing.StatusExpired, 2},
		{"2026-04-01 09:00", billing.StatusExpired, 2},
	}
	for i, s := range steps {
		f.clock.Set(at(s.now))
		if err := f.h.Handle(ctx, sweepJob(int64(100+i), tenant, map[string]any{"tenant_id": tenant})); err != nil {
			t.Fatalf("%s: sweep: %v", s.now, err)
		}
		got, hist := f.get(t, tenant)
		if got.Status != s.want {
			t.Errorf("%s: status %s, want %s", s.now, got.Status, s.want)
		}
		if want := billing.StatusAt(got.PeriodEnd, at(s.now)); want != s.want {
			t.Errorf("%s: StatusAt says %s, want %s", s.now, want, s.want)
		}
		if len(hist) != s.changes {
			t.Errorf("%s: %d status changes recorded, want %d", s.now, len(hist), s.changes)
		}
	}

	_, hist := f.get(t, tenant)
	if len(hist) != 2 {
		t.Fatalf("history: %+v", hist)
	}
	// Each change is in the tenant's trail, by the system, with its job.
	var trail int
	if err := f.db.Admin.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND actor_kind = 'system'
		AND action = 'subscription.status_changed' AND job_id IN (102, 105)`, tenant).Scan(&trail); err != nil {
		t.Fatal(err)
	}
	if trail != 2 {
		t.Fatalf("status changes in the trail: %d, want 2", trail)
	}
	wantHist := []struct {
		from, to billing.Status
		at       string
		job      int64
	}{
		{billing.StatusActive, billing.StatusGrace, "2026-03-03 09:00", 102},
		{billing.StatusGrace, billing.StatusExpired, "2026-03-10 09:00", 105},
	}
	for i, w := range wantHist {
		h := hist[i]
		if h.FromStatus != w.from || h.ToStatus != w.to || !h.ChangedAt.Equal(at(w.at)) || h.JobID == nil || *h.JobID != w.job {
			t.Errorf("history[%d] = %s→%s at %s job %v, want %s→%s at %s job %d",
				i, h.FromStatus, h.ToStatus, h.ChangedAt, h.JobID, w.from, w.to, w.at, w.job)
		}
	}

	// Renewing makes it active again; the next sweep has nothing to do.
	f.clock.Set(at("2026-04-02 10:00"))
	sub, _ = f.subscribe(t, tenant, "pro")
	if sub.Status != billing.StatusActive || !sub.PeriodEnd.Equal(at("2026-05-02 10:00")) {
		t.Fatalf("after renewal: %+v", sub)
	}
	if err := f.h.Handle(ctx, sweepJob(200, tenant, map[string]any{"tenant_id": tenant})); err != nil {
		t.Fatal(err)
	}
	if got, hist := f.get(t, tenant); got.Status != billing.StatusActive || len(hist) != 2 {
		t.Fatalf("sweep after renewal: %s with %d changes", got.Status, len(hist))
	}
}

func TestSweepWithDatabaseClock(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	tenant := f.tenant(t, "acme")
	svc := billing.NewService(nil) // production: now() of the database
	err := database.InTenantTx(ctx, f.db.App, tenant, func(tx pgx.Tx) error {
		sub, _, err := svc.Subscribe(ctx, tx, tenant, "basic", nil)
		if err != nil {
			return err
		}
		if d := sub.PeriodEnd.Sub(sub.PeriodStart); d != billing.PeriodDays*24*time.Hour {
			t.Errorf("period length %s", d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Push the period into the past with the owner's hands, then sweep.
	if _, err := f.db.Admin.Exec(ctx, `UPDATE subscriptions SET current_period_start = now() - interval '40 days',
		current_period_end = now() - interval '10 days' WHERE tenant_id = $1`, tenant); err != nil {
		t.Fatal(err)
	}
	h := &billing.SweepHandler{App: f.db.App, Service: svc}
	if err := h.Handle(ctx, sweepJob(1, tenant, map[string]any{"tenant_id": tenant})); err != nil {
		t.Fatal(err)
	}
	if got, hist := f.get(t, tenant); got.Status != billing.StatusExpired || len(hist) != 1 {
		t.Fatalf("status %s with %d changes, want expired with 1", got.Status, len(hist))
	}
}

func TestSubscribeKeepsPlanHistory(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	tenant := f.tenant(t, "acme")

	_, c1 := f.subscribe(t, tenant, "basic")
	if c1.FromPlan != nil || c1.ToPlan != "basic" {
		t.Fatalf("first change: %+v", c1)
	}
	f.clock.Advance(24 * time.Hour)
	_, c2 := f.subscribe(t, tenant, "pro")
	f.clock.Advance(24 * time.Hour)
	sub, c3 := f.subscribe(t, tenant, "business")
	if sub.PlanCode != "business" || !sub.PeriodStart.Equal(at("2026-02-03 09:00")) {
		t.Fatalf("current subscription: %+v", sub)
	}
	if c2.FromPlan == nil || *c2.FromPlan != "basic" || c3.FromPlan == nil || *c3.FromPlan != "pro" {
		t.Fatalf("changes: %+v %+v", c2, c3)
	}

	var hist []billing.Change
	err := database.InTenantTx(ctx, f.db.App, tenant, func(tx pgx.Tx) error {
		var err error
		hist, err = billing.ListChanges(ctx, tx, tenant)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ from, to, at string }
	want := []row{ // newest first
		{"pro", "business", "2026-02-03 09:00"},
		{"basic", "pro", "2026-02-02 09:00"},
		{"", "basic", "2026-02-01 09:00"},
	}
	if len(hist) != len(want) {
		t.Fatalf("%d history rows, want %d: %+v", len(hist), len(want), hist)
	}
	for i, w := range want {
		h := hist[i]
		from := ""
		if h.FromPlan != nil {
			from = *h.FromPlan
		}
		if from != w.from || h.ToPlan != w.to || !h.ChangedAt.Equal(at(w.at)) || h.ChangedBy == nil || *h.ChangedBy != f.user {
			t.Errorf("history[%d] = %s→%s at %s by %v, want %s→%s at %s by %d", i, from, h.ToPlan, h.ChangedAt, h.ChangedBy, w.from, w.to, w.at, f.user)
		}
	}
}

func TestSubscribeUnknownPlanWritesNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	fresh := f.tenant(t, "fresh")
	existing := f.tenant(t, "existing")
	f.subscribe(t, existing, "pro")

	for _, tenant := range []int64{fresh, existing} {
		for _, plan := range []string{"platinum", "", "  "} {
			err := database.InTenantTx(ctx, f.db.App, tenant, func(tx pgx.Tx) error {
				_, _, err := f.svc.Subscribe(ctx, tx, tenant, plan, &f.user)
				return err
			})
			if !errors.Is(err, billing.ErrUnknownPlan) {
				t.Errorf("tenant %d plan %q: %v, want ErrUnknownPlan", tenant, plan, err)
			}
		}
	}
	var subs, changes int
	if err := f.db.Admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM subscriptions), (SELECT count(*) FROM subscription_changes)`).Scan(&subs, &changes); err != nil {
		t.Fatal(err)
	}
	if subs != 1 || changes != 1 {
		t.Fatalf("after unknown plans: %d subscriptions, %d changes; want 1 and 1", subs, changes)
	}
	if sub, _ := f.get(t, existing); sub.PlanCode != "pro" {
		t.Fatalf("existing plan became %q", sub.PlanCode)
	}
}

func TestSweepRejectsBadJobs(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	tenant := f.tenant(t, "acme")
	other := f.tenant(t, "other")
	f.subscribe(t, tenant, "pro")
	f.clock.Set(at("2026-06-01 00:00")) // any sweep that ran would expire it

	user := f.user
	noSystem := &billing.SweepHandler{App: f.db.App, Service: f.svc}
	cases := []struct {
		name  string
		h     *billing.SweepHandler
		job   *job.Job
		class job.Class
	}{
		{"not json", f.h, &job.Job{ID: 1, TenantID: tenant, Payload: json.RawMessage(`nope`)}, job.ClassPermanent},
		{"missing tenant", f.h, sweepJob(1, tenant, map[string]any{}), job.ClassPermanent},
		{"unknown field", f.h, sweepJob(1, tenant, map[string]any{"tenant_id": tenant, "all_tenant": true}), job.ClassPermanent},
		{"tenant as string", f.h, sweepJob(1, tenant, map[string]any{"tenant_id": "1"}), job.ClassPermanent},
		{"other tenant", f.h, sweepJob(1, tenant, map[string]any{"tenant_id": other}), job.ClassPolicy},
		{"all tenants by a user", f.h, func() *job.Job {
			j := sweepJob(1, tenant, map[string]any{"tenant_id": tenant, "all_tenants": true})
			j.RequestedBy = &user
			return j
		}(), job.ClassPolicy},
		{"all tenants without system pool", noSystem, sweepJob(1, tenant, map[string]any{"tenant_id": tenant, "all_tenants": true}), job.ClassPermanent},
	}
	for _, c := range cases {
		err := c.h.Handle(ctx, c.job)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if got := job.ClassOf(err); got != c.class {
			t.Errorf("%s: class %s, want %s (%v)", c.name, got, c.class, err)
		}
	}
	if sub, hist := f.get(t, tenant); sub.Status != billing.StatusActive || len(hist) != 0 {
		t.Fatalf("a rejected sweep changed the subscription: %s, %d changes", sub.Status, len(hist))
	}
}

func TestSweepStaysInItsTenantUnlessSystemSweepsAll(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	a := f.tenant(t, "tenant-a")
	b := f.tenant(t, "tenant-b")
	f.subscribe(t, a, "pro")
	f.subscribe(t, b, "basic")
	f.clock.Set(at("2026-03-04 09:00")) // both in grace

	if err := f.h.Handle(ctx, sweepJob(1, a, map[string]any{"tenant_id": a})); err != nil {
		t.Fatal(err)
	}
	if sub, _ := f.get(t, a); sub.Status != billing.StatusGrace {
		t.Fatalf("tenant a: %s", sub.Status)
	}
	if sub, hist := f.get(t, b); sub.Status != billing.StatusActive || len(hist) != 0 {
		t.Fatalf("tenant a's sweep touched tenant b: %s, %d changes", sub.Status, len(hist))
	}

	// A jejak_app transaction cannot reach further even when asked to
	// sweep everything: row-level security limits it to its tenant.
	err := database.InTenantTx(ctx, f.db.App, a, func(tx pgx.Tx) error {
		_, err := f.svc.SweepAll(ctx, tx, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if sub, _ := f.get(t, b); sub.Status != billing.StatusActive {
		t.Fatalf("SweepAll in tenant a's transaction changed tenant b: %s", sub.Status)
	}

	// A system job sweeps every tenant through the system pool.
	if err := f.h.Handle(ctx, sweepJob(2, a, map[string]any{"tenant_id": a, "all_tenants": true})); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []int64{a, b} {
		if sub, hist := f.get(t, tn); sub.Status != billing.StatusGrace || len(hist) != 1 {
			t.Errorf("tenant %d after the all-tenants sweep: %s, %d changes", tn, sub.Status, len(hist))
		}
	}
}

// A second sweep that starts while the first holds the row must see the
// first's result and record nothing: the sweep locks before it decides.
func TestConcurrentSweepsRecordOneChange(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	tenant := f.tenant(t, "acme")
	f.subscribe(t, tenant, "pro")
	f.clock.Set(at("2026-03-04 09:00"))

	first, err := f.db.App.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback(ctx) //nolint:errcheck
	if _, err := first.Exec(ctx, "SELECT set_config('app.tenant_id', $1, true)", fmt.Sprint(tenant)); err != nil {
		t.Fatal(err)
	}
	if ch, err := f.svc.Sweep(ctx, first, tenant, nil); err != nil || len(ch) != 1 {
		t.Fatalf("first sweep: %v, %d changes", err, len(ch))
	}

	done := make(chan error, 1)
	go func() { done <- f.h.Handle(ctx, sweepJob(2, tenant, map[string]any{"tenant_id": tenant})) }()

	// Wait (polling with a deadline) until the second sweep is blocked on
	// the first one's row lock, then let the first commit.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := f.db.Admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("second sweep never blocked on the first")
		}
		runtime.Gosched()
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if sub, hist := f.get(t, tenant); sub.Status != billing.StatusGrace || len(hist) != 1 {
		t.Fatalf("after two overlapping sweeps: %s with %d changes, want grace with 1", sub.Status, len(hist))
	}
}
