package demo_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/activity"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestSeedHistoryTellsTheStory: the seeded trail answers "who deleted
// Katalog Musim Hujan three weeks ago, and who downgraded the plan", its
// chains verify, events are in time order, and seeding twice adds nothing.
func TestSeedHistoryTellsTheStory(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i := 0; i < 2; i++ {
		if err := demo.Seed(ctx, db.System); err != nil {
			t.Fatal(err)
		}
		if err := demo.SeedHistory(ctx, db.System, clock.NewFrozen(now)); err != nil {
			t.Fatalf("seed history #%d: %v", i+1, err)
		}
	}
	// The server's sealer orders the trail; here it runs once, unsigned.
	if err := audit.NewSealer(db.System, audit.SealerOptions{}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	var melati int64
	var events, outOfOrder int
	if err := db.Admin.QueryRow(ctx, `SELECT id FROM tenants WHERE slug = 'toko-bunga-melati'`).Scan(&melati); err != nil {
		t.Fatal(err)
	}
	if err := db.Admin.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE occurred_at < prev) FROM (
		SELECT e.occurred_at, lag(e.occurred_at) OVER (ORDER BY l.seq) AS prev
		FROM audit_events e JOIN audit_leaves l ON l.tenant_id = e.tenant_id AND l.event_id = e.id
		WHERE e.tenant_id = $1) x`, melati).Scan(&events, &outOfOrder); err != nil {
		t.Fatal(err)
	}
	if events < 30 || outOfOrder != 0 {
		t.Fatalf("Melati's history: %d events, %d out of time order", events, outOfOrder)
	}
	res, err := audit.VerifyAll(ctx, db.System, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !r.OK || r.CheckedThrough == 0 {
			t.Fatalf("log of tenant %d after seeding history: %+v", r.TenantID, r)
		}
	}

	who := func(action, key, value string) (string, time.Time) {
		t.Helper()
		p, err := audit.Timeline(ctx, db.System, melati, audit.Filter{Action: action}, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Rows {
			var d map[string]any
			_ = json.Unmarshal(e.Detail, &d)
			if d[key] == value && e.ActorID != nil {
				var name string
				if err := db.Admin.QueryRow(ctx, `SELECT name FROM users WHERE id = $1`, *e.ActorID).Scan(&name); err != nil {
					t.Fatal(err)
				}
				return name, e.OccurredAt
			}
		}
		t.Fatalf("no %s with %s=%s in Melati's trail", action, key, value)
		return "", time.Time{}
	}
	name, at := who("project.delete", "name", "Katalog Musim Hujan")
	if name != "Rina Wulandari" || now.Sub(at) < 20*24*time.Hour || now.Sub(at) > 22*24*time.Hour {
		t.Fatalf("Katalog Musim Hujan deleted by %q at %s, want Rina Wulandari three weeks ago", name, at)
	}
	name, at = who("subscription.change", "to_plan", "free")
	if name != "Budi Santoso" || now.Sub(at) < 13*24*time.Hour || now.Sub(at) > 15*24*time.Hour {
		t.Fatalf("plan downgraded by %q at %s, want Budi Santoso two weeks ago", name, at)
	}
	// The staff retry carries its reason; the sweep acts as the system.
	for _, q := range []string{
		`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'job.replayed' AND actor_kind = 'staff' AND detail->>'reason' <> ''`,
		`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'subscription.status' AND actor_kind = 'system' AND detail->>'to_status' = 'grace'`,
		`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'report.sent'`,
		`SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'member.invite'`,
	} {
		var n int
		if err := db.Admin.QueryRow(ctx, q, melati).Scan(&n); err != nil || n == 0 {
			t.Fatalf("%s: %d %v", q, n, err)
		}
	}
	// The story's plan changes are in the plan history too, and the plan is
	// where the story leaves it.
	var changes int
	var plan string
	if err := db.Admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM subscription_changes WHERE tenant_id = $1),
		(SELECT plan_code FROM subscriptions WHERE tenant_id = $1)`, melati).Scan(&changes, &plan); err != nil || changes != 3 || plan != "pro" {
		t.Fatalf("plan history: %d changes, plan %q, %v", changes, plan, err)
	}
}

// TestSeedHistoryChartsAgreeWithTheTrail: the owner home's 30-day job
// chart counts the dead letter the seeded trail tells about, on the same
// day in the tenant's zone (it used to say "0 dead letters" beside a trail
// showing one).
func TestSeedHistoryChartsAgreeWithTheTrail(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	if err := demo.SeedHistory(ctx, db.System, clock.NewFrozen(now)); err != nil {
		t.Fatal(err)
	}
	var melati int64
	var zone string
	if err := db.Admin.QueryRow(ctx, `SELECT id, time_zone FROM tenants WHERE slug = 'toko-bunga-melati'`).Scan(&melati, &zone); err != nil {
		t.Fatal(err)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	trail := map[string]int64{}
	rows, err := db.Admin.Query(ctx, `SELECT occurred_at FROM audit_events WHERE tenant_id = $1 AND action = 'job.dead_lettered'`, melati)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var at time.Time
		if err := rows.Scan(&at); err != nil {
			t.Fatal(err)
		}
		trail[at.In(loc).Format(time.DateOnly)]++
	}
	if rows.Err() != nil || len(trail) == 0 {
		t.Fatalf("the seeded trail has no dead letter (%v)", rows.Err())
	}
	read := activity.NewChart(melati, loc, now, 30)
	if err := database.ReadTenantAll(ctx, db.App, melati, read.Reads(ctx)...); err != nil {
		t.Fatal(err)
	}
	days := read.Days()
	chart := map[string]int64{}
	for _, d := range days {
		if d.Dead > 0 {
			chart[d.Date.Format(time.DateOnly)] = d.Dead
		}
		if d.Dead > d.Failed {
			t.Errorf("%s: %d dead letters but only %d failed attempts", d.Date.Format(time.DateOnly), d.Dead, d.Failed)
		}
	}
	if len(chart) != len(trail) {
		t.Fatalf("dead letters per day: chart %v, trail %v", chart, trail)
	}
	for day, n := range trail {
		if chart[day] != n {
			t.Errorf("%s: chart %d dead letters, trail %d", day, chart[day], n)
		}
	}
}
