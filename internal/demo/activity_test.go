package demo_test

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/kinds"
	"github.com/jejakhq/jejak/internal/mail"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/testdb"
)

func TestSeedIsIdempotent(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	counts := func() (n [5]int) {
		// The reserved system tenant comes from a migration, not the seed.
		for i, table := range []string{"tenants WHERE NOT is_system", "users", "memberships", "projects", "subscription_changes"} {
			if err := db.Admin.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n[i]); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	for i := 0; i < 2; i++ {
		if err := demo.Seed(ctx, db.System); err != nil {
			t.Fatalf("seed #%d: %v", i+1, err)
		}
	}
	got := counts()
	want := [5]int{3, 11, 9, 7, 3}
	if got != want {
		t.Fatalf("after two seeds (tenants, users, memberships, projects, plan history) = %v, want %v", got, want)
	}
	var n int
	if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM projects p JOIN tenants t ON t.id = p.tenant_id
		WHERE t.slug = 'toko-bunga-melati' AND p.name = 'Katalog Musim Hujan'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("Melati's Katalog Musim Hujan: %d %v", n, err)
	}
}

// TestActivityProducesAMixThatSucceedsRetriesAndDies runs the generator
// for a while with real workers: it must create audited changes, jobs that
// succeed, and dead letters (a malformed award dies at once).
func TestActivityProducesAMixThatSucceedsRetriesAndDies(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	engine, err := job.New(job.Config{Pool: db.System, Workers: 4, Logger: log, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	kinds.Register(engine, kinds.Deps{App: db.App, System: db.System, Mailer: demo.BounceMailer{Next: mail.NewSink(db.App)}})
	if err := engine.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer engine.Stop(context.Background())

	a := &demo.Activity{App: db.App, System: db.System, Tenants: tenant.NewService(db.App, db.System, clock.Database{}),
		Jobs: engine, Log: log, Rand: rand.New(rand.NewPCG(1, 2))}
	for i := 0; i < 120; i++ {
		if err := a.Step(ctx); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	count := func(sql string) int {
		var n int
		if err := db.Admin.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, action := range []string{"project.create", "system.daily-export"} {
		if count(`SELECT count(*) FROM audit_events WHERE action = '`+action+`'`) == 0 {
			t.Errorf("no %s events", action)
		}
	}
	// Nothing that changes nothing is recorded: a plan "change" always
	// moves to another plan.
	if n := count(`SELECT count(*) FROM audit_events WHERE action = 'subscription.change' AND detail->>'from_plan' = detail->>'to_plan'`); n != 0 {
		t.Errorf("%d plan changes to the same plan were recorded", n)
	}
	if count(`SELECT count(*) FROM audit_events WHERE action = 'subscription.change'`) == 0 {
		t.Error("no plan changes at all")
	}
	// Several people act, not only the owners: admins change things,
	// members sign in and ask for reports.
	if n := count(`SELECT count(DISTINCT m.role) FROM audit_events e JOIN memberships m
		ON m.tenant_id = e.tenant_id AND m.user_id = e.actor_id WHERE e.actor_kind = 'user'`); n < 3 {
		t.Errorf("events by %d kinds of member, want owners, admins and members", n)
	}
	if n := count(`SELECT count(*) FROM audit_events e JOIN memberships m ON m.tenant_id = e.tenant_id AND m.user_id = e.actor_id
		WHERE m.role = 'admin' AND e.action LIKE 'project.%'`); n == 0 {
		t.Error("no admin ever changed a project")
	}
	// Poll with a deadline until the workers have produced both outcomes.
	for {
		succeeded := count(`SELECT count(*) FROM jobs WHERE state = 'succeeded'`)
		dead := count(`SELECT count(*) FROM jobs WHERE state = 'dead' AND error_class = 'permanent'`)
		retrying := count(`SELECT count(*) FROM jobs WHERE state = 'pending' AND attempt >= 1 AND last_error LIKE '%bounce.test%'`)
		if succeeded > 0 && dead > 0 && retrying > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("workers never produced the mix: succeeded=%d dead=%d retrying=%d", succeeded, dead, retrying)
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Seed projects survive the deletions.
	if count(`SELECT count(*) FROM projects WHERE name = 'Katalog Musim Hujan'`) != 1 {
		t.Fatal("the generator deleted a seed project")
	}
}

// TestActivityFailsJobsOnlyInItsIncidents: the generator makes jobs fail
// (malformed awards, reports to the bounce domain) only during its staged
// incidents, from its first step on and again every half hour, so the
// dead-letter alert it causes fires and then resolves.
func TestActivityFailsJobsOnlyInItsIncidents(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	engine, err := job.New(job.Config{Pool: db.System, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	now := start
	a := &demo.Activity{App: db.App, System: db.System, Tenants: tenant.NewService(db.App, db.System, clock.Database{}),
		Jobs: engine, Log: log, Rand: rand.New(rand.NewPCG(3, 4)), Now: func() time.Time { return now }}
	// failing counts the jobs enqueued so far that are made to fail.
	failing := func() int {
		var n int
		if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM jobs
			WHERE (kind = 'points.award' AND payload->>'points' = '0')
			   OR (kind = 'email.weekly-report' AND payload ? 'to')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	steps := func(at time.Time) int {
		t.Helper()
		now = at
		before := failing()
		for i := range 150 {
			if err := a.Step(ctx); err != nil {
				t.Fatalf("step %d at %s: %v", i, at, err)
			}
		}
		return failing() - before
	}
	if n := steps(start); n == 0 {
		t.Fatal("no job made to fail at the start of the first incident")
	}
	if n := steps(start.Add(4 * time.Minute)); n == 0 {
		t.Fatal("no job made to fail late in the first incident")
	}
	if n := steps(start.Add(6 * time.Minute)); n != 0 {
		t.Fatalf("%d jobs made to fail after the incident", n)
	}
	if n := steps(start.Add(29 * time.Minute)); n != 0 {
		t.Fatalf("%d jobs made to fail just before the next incident", n)
	}
	if n := steps(start.Add(31 * time.Minute)); n == 0 {
		t.Fatal("no job made to fail in the second incident")
	}
}
