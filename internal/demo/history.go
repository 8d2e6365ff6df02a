package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
)

// HistoryDays is how far back the demo history reaches.
const HistoryDays = 42

// SupportEmail is the demo support account that retries dead letters in
// the seeded history.
const SupportEmail = "support@jejak.test"

// SeedHistory writes, for every demo tenant whose audit trail is still
// empty, a back-dated six-week history that tells the tenant's story:
// sign-ins, projects created, a member invited, the first project deleted
// three weeks ago by that member (and re-created by the owner), the member's
// role narrowed, the nightly sweep moving the subscription into grace and
// back, weekly reports, a dead letter retried by support with a reason, and
// the plan downgraded two weeks ago by the owner (and upgraded again later).
//
// A tenant whose trail already has events is left alone: a chain only grows
// forward in time, so back-dated events cannot follow newer ones. That also
// makes seeding idempotent. clk supplies "now" (nil reading = the database's).
// Run Seed first.
func SeedHistory(ctx context.Context, system database.Beginner, clk clock.Clock) error {
	if clk == nil {
		clk = clock.Database{}
	}
	return database.InTx(ctx, system, func(tx pgx.Tx) error {
		var now time.Time
		if n := clk.Now(); n != nil {
			now = *n
		} else if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return fmt.Errorf("read the time: %w", err)
		}
		for _, t := range Tenants {
			if err := seedTenantHistory(ctx, tx, t.Slug, t.Projects, now); err != nil {
				return fmt.Errorf("demo history of %s: %w", t.Slug, err)
			}
		}
		return nil
	})
}

type historyEvent struct {
	at    time.Time
	event audit.Event
}

func seedTenantHistory(ctx context.Context, tx pgx.Tx, slug string, projects []string, now time.Time) error {
	var tenantID int64
	var hasEvents bool
	if err := tx.QueryRow(ctx, `SELECT t.id, EXISTS (SELECT FROM audit_events e WHERE e.tenant_id = t.id)
		FROM tenants t WHERE t.slug = $1`, slug).Scan(&tenantID, &hasEvents); err != nil {
		return err
	}
	if hasEvents {
		return nil
	}
	// Two seeders at once (two replicas starting with --demo): a per-tenant
	// advisory lock makes the second wait here, and the re-check below (a
	// new statement at READ COMMITTED) then sees the first one's events.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('demo-history'), $1::int)`, tenantID); err != nil {
		return err
	}
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM audit_events WHERE tenant_id = $1)`, tenantID).Scan(&hasEvents); err != nil || hasEvents {
		return err
	}
	ids := func(email string) (int64, error) {
		var id int64
		err := tx.QueryRow(ctx, `SELECT id FROM users WHERE email = $1`, email).Scan(&id)
		return id, err
	}
	var ownerEmail, memberEmail string
	for _, a := range Accounts {
		if a.Tenant == slug && a.Role == "owner" {
			ownerEmail = a.Email
		}
		if a.Tenant == slug && a.Role == "member" {
			memberEmail = a.Email
		}
	}
	owner, err := ids(ownerEmail)
	if err != nil {
		return fmt.Errorf("owner %s: %w", ownerEmail, err)
	}
	member, err := ids(memberEmail)
	if err != nil {
		return fmt.Errorf("member %s: %w", memberEmail, err)
	}
	support, err := ids(SupportEmail)
	if err != nil {
		return fmt.Errorf("support %s: %w", SupportEmail, err)
	}
	var plan string
	if err := tx.QueryRow(ctx, `SELECT plan_code FROM subscriptions WHERE tenant_id = $1`, tenantID).Scan(&plan); err != nil {
		return fmt.Errorf("subscription: %w", err)
	}
	other := "free"
	if plan == "free" {
		other = "pro"
	}

	jkt, err := time.LoadLocation("Asia/Jakarta")
	if err != nil {
		jkt = time.FixedZone("WIB", 7*3600)
	}
	today := now.In(jkt)
	at := func(daysAgo, hour, minute int) time.Time {
		d := today.AddDate(0, 0, -daysAgo)
		return time.Date(d.Year(), d.Month(), d.Day(), hour, minute, 0, 0, jkt)
	}
	var evs []historyEvent
	add := func(t time.Time, e audit.Event) {
		e.TenantID = tenantID
		if e.TraceID == "" {
			e.TraceID = fmt.Sprintf("demo%012d%016x", tenantID, t.Unix())
		}
		evs = append(evs, historyEvent{t, e})
	}
	user := func(id int64) (audit.ActorKind, *int64) { v := id; return audit.ActorUser, &v }
	detail := func(m map[string]any) json.RawMessage { b, _ := json.Marshal(m); return b }
	act := func(t time.Time, actorID int64, action, entity, entityID string, d map[string]any) {
		kind, id := user(actorID)
		add(t, audit.Event{ActorKind: kind, ActorID: id, Action: action, Entity: entity, EntityID: entityID, Detail: detail(d)})
	}
	system := func(t time.Time, action, entity, entityID string, d map[string]any, jobID *int64) {
		add(t, audit.Event{ActorKind: audit.ActorSystem, Action: action, Entity: entity, EntityID: entityID, Detail: detail(d), JobID: jobID})
	}
	signin := func(t time.Time, uid int64) {
		act(t, uid, "auth.signin", "user", strconv.FormatInt(uid, 10), map[string]any{"ip": "203.0.113." + strconv.FormatInt(10+uid%200, 10)})
	}
	// A job id from the jobs sequence: no real job will ever take it, so
	// the story's dead letter has an entity history of its own.
	jobID := func() (int64, error) {
		var id int64
		err := tx.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence('jobs', 'id'))`).Scan(&id)
		return id, err
	}
	projectID := func(name string) (int64, error) {
		var id int64
		err := tx.QueryRow(ctx, `SELECT id FROM projects WHERE tenant_id = $1 AND name = $2`, tenantID, name).Scan(&id)
		return id, err
	}
	// The first project is deleted by the member and re-created by the owner:
	// its first incarnation gets a real id that no longer exists.
	var deletedID int64
	if err := tx.QueryRow(ctx, `INSERT INTO projects (tenant_id, name, created_by, created_at)
		VALUES ($1, $2, $3, $4) RETURNING id`, tenantID, projects[0], owner, at(42, 9, 5)).Scan(&deletedID); err != nil {
		return fmt.Errorf("deleted project: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM projects WHERE id = $1`, deletedID); err != nil {
		return fmt.Errorf("deleted project: %w", err)
	}

	signin(at(42, 8, 55), owner)
	act(at(42, 9, 5), owner, "project.create", "project", strconv.FormatInt(deletedID, 10), map[string]any{"name": projects[0]})
	for i, name := range projects[1:] {
		id, err := projectID(name)
		if err != nil {
			return fmt.Errorf("project %q: %w", name, err)
		}
		t := at(42, 9, 10+i)
		if _, err := tx.Exec(ctx, `UPDATE projects SET created_at = $1 WHERE id = $2`, t, id); err != nil {
			return err
		}
		act(t, owner, "project.create", "project", strconv.FormatInt(id, 10), map[string]any{"name": name})
	}
	act(at(41, 10, 0), owner, "member.invite", "user", strconv.FormatInt(member, 10), map[string]any{"email": memberEmail, "role": "admin"})
	for _, a := range Accounts {
		if a.Tenant != slug || a.Role != "admin" {
			continue
		}
		admin, err := ids(a.Email)
		if err != nil {
			return fmt.Errorf("admin %s: %w", a.Email, err)
		}
		act(at(38, 11, 0), owner, "member.invite", "user", strconv.FormatInt(admin, 10), map[string]any{"email": a.Email, "role": "admin"})
		signin(at(37, 9, 0), admin)
		act(at(37, 9, 1), admin, "member.join", "user", strconv.FormatInt(admin, 10), map[string]any{"role": "admin"})
	}
	signin(at(40, 19, 30), member)
	act(at(40, 19, 31), member, "member.join", "user", strconv.FormatInt(member, 10), map[string]any{"role": "admin"})
	for _, d := range []int{35, 28, 21, 14, 7} {
		week := at(d, 7, 0)
		y, w := week.ISOWeek()
		system(week, "report.sent", "report", fmt.Sprintf("%d-W%02d", y, w), map[string]any{"to": ownerEmail, "kind": "email.weekly-report"}, nil)
	}
	sweep := func(t time.Time, from, to string) error {
		id, err := jobID()
		if err != nil {
			return err
		}
		system(t, "subscription.status", "subscription", strconv.FormatInt(tenantID, 10), map[string]any{"from_status": from, "to_status": to}, &id)
		return nil
	}
	if err := sweep(at(24, 0, 5), "active", "grace"); err != nil {
		return err
	}
	if err := sweep(at(23, 0, 5), "grace", "active"); err != nil {
		return err
	}
	signin(at(21, 14, 12), member)
	act(at(21, 14, 17), member, "project.delete", "project", strconv.FormatInt(deletedID, 10), map[string]any{"name": projects[0]})
	signin(at(20, 8, 45), owner)
	if id, err := projectID(projects[0]); err == nil {
		t := at(20, 8, 52)
		if _, err := tx.Exec(ctx, `UPDATE projects SET created_at = $1 WHERE id = $2`, t, id); err != nil {
			return err
		}
		act(t, owner, "project.create", "project", strconv.FormatInt(id, 10), map[string]any{"name": projects[0]})
	}
	act(at(20, 8, 55), owner, "membership.set", "user", strconv.FormatInt(member, 10), map[string]any{"from_role": "admin", "to_role": "member"})

	change := func(t time.Time, from, to string) error {
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO subscription_changes (tenant_id, from_plan, to_plan, changed_by, changed_at)
			VALUES ($1, $2, $3, $4, $5) RETURNING id`, tenantID, from, to, owner, t).Scan(&id); err != nil {
			return err
		}
		act(t, owner, "subscription.change", "subscription", strconv.FormatInt(id, 10), map[string]any{"from_plan": from, "to_plan": to})
		return nil
	}
	signin(at(14, 10, 25), owner)
	if err := change(at(14, 10, 31), plan, other); err != nil {
		return err
	}
	dead, err := jobID()
	if err != nil {
		return err
	}
	for i, stage := range []string{"failed", "failed", "dead_lettered"} {
		d := map[string]any{"kind": "email.weekly-report", "stage": stage, "attempt": i + 1,
			"reason": "SMTP " + BounceDomain + " tidak merespons dalam 5 detik"}
		system(at(10, 7, []int{0, 2, 6}[i]), "job."+stage, "job", strconv.FormatInt(dead, 10), d, &dead)
	}
	sid := support
	add(at(9, 10, 45), audit.Event{ActorKind: audit.ActorStaff, ActorID: &sid, Action: "job.replayed", Entity: "job",
		EntityID: strconv.FormatInt(dead, 10), JobID: &dead, Detail: detail(map[string]any{"kind": "email.weekly-report",
			"stage": "replayed", "attempt": 3, "reason": "Alamat e-mail pemilik sudah diperbaiki; kirim ulang laporan minggu ini"})})
	system(at(9, 10, 46), "job.succeeded", "job", strconv.FormatInt(dead, 10), map[string]any{"kind": "email.weekly-report", "stage": "succeeded", "attempt": 4}, &dead)
	signin(at(5, 9, 20), owner)
	if err := change(at(5, 9, 24), other, plan); err != nil {
		return err
	}
	signin(at(3, 8, 40), owner)
	signin(at(2, 16, 5), member)
	signin(at(1, 8, 30), owner)

	// Memberships date from the story's invitations.
	for _, m := range []struct {
		id   int64
		days int
	}{{owner, 42}, {member, 40}} {
		if _, err := tx.Exec(ctx, `UPDATE memberships SET created_at = $1 WHERE tenant_id = $2 AND user_id = $3`,
			at(m.days, 9, 0), tenantID, m.id); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE memberships m SET created_at = $1 FROM users u
		WHERE m.tenant_id = $2 AND m.user_id = u.id AND m.role = 'admin' AND u.email LIKE '%@%'`, at(37, 9, 0), tenantID); err != nil {
		return err
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	clk := clock.NewFrozen(evs[0].at)
	rec := audit.NewRecorder(clk)
	for _, e := range evs {
		clk.Set(e.at)
		if _, err := rec.Record(ctx, tx, e.event); err != nil {
			return err
		}
	}
	return nil
}
