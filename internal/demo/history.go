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
	tenantID, empty, err := lockEmptyTrail(ctx, tx, slug)
	if err != nil || !empty {
		return err
	}
	s, err := newStory(ctx, tx, slug, tenantID, now)
	if err != nil {
		return err
	}
	// The chapters run in this order because the job ids they draw from the
	// jobs sequence, and the projects they insert, follow it.
	chapters := []func(context.Context) error{
		func(ctx context.Context) error { return s.founding(ctx, projects) },
		s.team,
		s.reports,
		s.sweeps,
		func(ctx context.Context) error { return s.reshuffle(ctx, projects) },
		s.downgrade,
		s.deadLetter,
		s.upgrade,
		s.membershipDates,
	}
	for _, ch := range chapters {
		if err := ch(ctx); err != nil {
			return err
		}
	}
	if err := s.recordStats(ctx); err != nil {
		return err
	}
	return s.record(ctx)
}

// lockEmptyTrail finds tenant slug and says whether its trail is empty,
// holding the tenant's demo-history lock when it is.
func lockEmptyTrail(ctx context.Context, tx pgx.Tx, slug string) (tenantID int64, empty bool, err error) {
	var hasEvents bool
	if err := tx.QueryRow(ctx, `SELECT t.id, EXISTS (SELECT FROM audit_events e WHERE e.tenant_id = t.id)
		FROM tenants t WHERE t.slug = $1`, slug).Scan(&tenantID, &hasEvents); err != nil {
		return 0, false, err
	}
	if hasEvents {
		return tenantID, false, nil
	}
	// Two seeders at once (two replicas starting with --demo): a per-tenant
	// advisory lock makes the second wait here, and the re-check below (a
	// new statement at READ COMMITTED) then sees the first one's events.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('demo-history'), $1::int)`, tenantID); err != nil {
		return 0, false, err
	}
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM audit_events WHERE tenant_id = $1)`, tenantID).Scan(&hasEvents); err != nil {
		return 0, false, err
	}
	return tenantID, !hasEvents, nil
}

// story is one tenant's back-dated history while it is written: its cast,
// the events so far, and the dates they fall on (in Jakarta time).
type story struct {
	tx                      pgx.Tx
	slug                    string
	tenantID                int64
	owner, member, support  int64
	ownerEmail, memberEmail string
	plan, other             string // the plan now, and the one it was downgraded to
	today                   time.Time
	deletedID               int64 // the first project's first incarnation
	evs                     []historyEvent
	stats                   []seededStat
}

// newStory reads the tenant's cast (its demo owner and member, and support)
// and its plan.
func newStory(ctx context.Context, tx pgx.Tx, slug string, tenantID int64, now time.Time) (*story, error) {
	s := &story{tx: tx, slug: slug, tenantID: tenantID}
	for _, a := range Accounts {
		if a.Tenant == slug && a.Role == "owner" {
			s.ownerEmail = a.Email
		}
		if a.Tenant == slug && a.Role == "member" {
			s.memberEmail = a.Email
		}
	}
	var err error
	if s.owner, err = s.userID(ctx, s.ownerEmail); err != nil {
		return nil, fmt.Errorf("owner %s: %w", s.ownerEmail, err)
	}
	if s.member, err = s.userID(ctx, s.memberEmail); err != nil {
		return nil, fmt.Errorf("member %s: %w", s.memberEmail, err)
	}
	if s.support, err = s.userID(ctx, SupportEmail); err != nil {
		return nil, fmt.Errorf("support %s: %w", SupportEmail, err)
	}
	if err := tx.QueryRow(ctx, `SELECT plan_code FROM subscriptions WHERE tenant_id = $1`, tenantID).Scan(&s.plan); err != nil {
		return nil, fmt.Errorf("subscription: %w", err)
	}
	s.other = "free"
	if s.plan == "free" {
		s.other = "pro"
	}
	jkt, err := time.LoadLocation("Asia/Jakarta")
	if err != nil {
		jkt = time.FixedZone("WIB", 7*3600)
	}
	s.today = now.In(jkt)
	return s, nil
}

// at is a time of day daysAgo days before today.
func (s *story) at(daysAgo, hour, minute int) time.Time {
	d := s.today.AddDate(0, 0, -daysAgo)
	return time.Date(d.Year(), d.Month(), d.Day(), hour, minute, 0, 0, s.today.Location())
}

func (s *story) add(t time.Time, e audit.Event) {
	e.TenantID = s.tenantID
	if e.TraceID == "" {
		e.TraceID = fmt.Sprintf("demo%012d%016x", s.tenantID, t.Unix())
	}
	s.evs = append(s.evs, historyEvent{t, e})
}

func detail(m map[string]any) json.RawMessage { b, _ := json.Marshal(m); return b }

// act is something user actorID did.
func (s *story) act(t time.Time, actorID int64, action, entity, entityID string, d map[string]any) {
	id := actorID
	s.add(t, audit.Event{ActorKind: audit.ActorUser, ActorID: &id, Action: action, Entity: entity, EntityID: entityID, Detail: detail(d)})
}

func (s *story) system(t time.Time, action, entity, entityID string, d map[string]any, jobID *int64) {
	s.add(t, audit.Event{ActorKind: audit.ActorSystem, Action: action, Entity: entity, EntityID: entityID, Detail: detail(d), JobID: jobID})
}

func (s *story) signin(t time.Time, uid int64) {
	s.act(t, uid, "auth.signin", "user", strconv.FormatInt(uid, 10), map[string]any{"ip": "203.0.113." + strconv.FormatInt(10+uid%200, 10)})
}

func (s *story) userID(ctx context.Context, email string) (int64, error) {
	var id int64
	err := s.tx.QueryRow(ctx, `SELECT id FROM users WHERE email = $1`, email).Scan(&id)
	return id, err
}

// jobID is a job id from the jobs sequence: no real job will ever take it,
// so the story's dead letter has an entity history of its own.
func (s *story) jobID(ctx context.Context) (int64, error) {
	var id int64
	err := s.tx.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence('jobs', 'id'))`).Scan(&id)
	return id, err
}

func (s *story) projectID(ctx context.Context, name string) (int64, error) {
	var id int64
	err := s.tx.QueryRow(ctx, `SELECT id FROM projects WHERE tenant_id = $1 AND name = $2`, s.tenantID, name).Scan(&id)
	return id, err
}

// createdProject back-dates project id to t and records its creation by
// the owner.
func (s *story) createdProject(ctx context.Context, t time.Time, id int64, name string) error {
	if _, err := s.tx.Exec(ctx, `UPDATE projects SET created_at = $1 WHERE id = $2`, t, id); err != nil {
		return err
	}
	s.act(t, s.owner, "project.create", "project", strconv.FormatInt(id, 10), map[string]any{"name": name})
	return nil
}

// founding: the owner creates the projects. The first project is deleted by
// the member and re-created by the owner: its first incarnation gets a real
// id that no longer exists.
func (s *story) founding(ctx context.Context, projects []string) error {
	if err := s.tx.QueryRow(ctx, `INSERT INTO projects (tenant_id, name, created_by, created_at)
		VALUES ($1, $2, $3, $4) RETURNING id`, s.tenantID, projects[0], s.owner, s.at(42, 9, 5)).Scan(&s.deletedID); err != nil {
		return fmt.Errorf("deleted project: %w", err)
	}
	if _, err := s.tx.Exec(ctx, `DELETE FROM projects WHERE id = $1`, s.deletedID); err != nil {
		return fmt.Errorf("deleted project: %w", err)
	}
	s.signin(s.at(42, 8, 55), s.owner)
	s.act(s.at(42, 9, 5), s.owner, "project.create", "project", strconv.FormatInt(s.deletedID, 10), map[string]any{"name": projects[0]})
	for i, name := range projects[1:] {
		id, err := s.projectID(ctx, name)
		if err != nil {
			return fmt.Errorf("project %q: %w", name, err)
		}
		if err := s.createdProject(ctx, s.at(42, 9, 10+i), id, name); err != nil {
			return err
		}
	}
	return nil
}

// team: the owner invites the member and the admins, who join.
func (s *story) team(ctx context.Context) error {
	s.act(s.at(41, 10, 0), s.owner, "member.invite", "user", strconv.FormatInt(s.member, 10), map[string]any{"email": s.memberEmail, "role": "admin"})
	for _, a := range Accounts {
		if a.Tenant != s.slug || a.Role != "admin" {
			continue
		}
		admin, err := s.userID(ctx, a.Email)
		if err != nil {
			return fmt.Errorf("admin %s: %w", a.Email, err)
		}
		s.act(s.at(38, 11, 0), s.owner, "member.invite", "user", strconv.FormatInt(admin, 10), map[string]any{"email": a.Email, "role": "admin"})
		s.signin(s.at(37, 9, 0), admin)
		s.act(s.at(37, 9, 1), admin, "member.join", "user", strconv.FormatInt(admin, 10), map[string]any{"role": "admin"})
	}
	s.signin(s.at(40, 19, 30), s.member)
	s.act(s.at(40, 19, 31), s.member, "member.join", "user", strconv.FormatInt(s.member, 10), map[string]any{"role": "admin"})
	return nil
}

// reports: the weekly report goes to the owner.
func (s *story) reports(context.Context) error {
	for _, d := range []int{35, 28, 21, 14, 7} {
		week := s.at(d, 7, 0)
		y, w := week.ISOWeek()
		s.system(week, "report.sent", "report", fmt.Sprintf("%d-W%02d", y, w), map[string]any{"to": s.ownerEmail, "kind": "email.weekly-report"}, nil)
		s.jobStat(week, 1, 0, 0)
	}
	return nil
}

// sweeps: the nightly sweep moves the subscription into grace and back.
func (s *story) sweeps(ctx context.Context) error {
	for _, sw := range []struct {
		days     int
		from, to string
	}{{24, "active", "grace"}, {23, "grace", "active"}} {
		id, err := s.jobID(ctx)
		if err != nil {
			return err
		}
		s.system(s.at(sw.days, 0, 5), "subscription.status", "subscription", strconv.FormatInt(s.tenantID, 10),
			map[string]any{"from_status": sw.from, "to_status": sw.to}, &id)
	}
	return nil
}

// reshuffle: the member deletes the first project, the owner re-creates it
// and narrows the member's role.
func (s *story) reshuffle(ctx context.Context, projects []string) error {
	s.signin(s.at(21, 14, 12), s.member)
	s.act(s.at(21, 14, 17), s.member, "project.delete", "project", strconv.FormatInt(s.deletedID, 10), map[string]any{"name": projects[0]})
	s.signin(s.at(20, 8, 45), s.owner)
	if id, err := s.projectID(ctx, projects[0]); err == nil {
		if err := s.createdProject(ctx, s.at(20, 8, 52), id, projects[0]); err != nil {
			return err
		}
	}
	s.act(s.at(20, 8, 55), s.owner, "membership.set", "user", strconv.FormatInt(s.member, 10), map[string]any{"from_role": "admin", "to_role": "member"})
	return nil
}

// change is the owner changing the plan.
func (s *story) change(ctx context.Context, t time.Time, from, to string) error {
	var id int64
	if err := s.tx.QueryRow(ctx, `INSERT INTO subscription_changes (tenant_id, from_plan, to_plan, changed_by, changed_at)
		VALUES ($1, $2, $3, $4, $5) RETURNING id`, s.tenantID, from, to, s.owner, t).Scan(&id); err != nil {
		return err
	}
	s.act(t, s.owner, "subscription.change", "subscription", strconv.FormatInt(id, 10), map[string]any{"from_plan": from, "to_plan": to})
	return nil
}

// downgrade: the owner moves to the other plan two weeks ago.
func (s *story) downgrade(ctx context.Context) error {
	s.signin(s.at(14, 10, 25), s.owner)
	return s.change(ctx, s.at(14, 10, 31), s.plan, s.other)
}

// deadLetter: the weekly report dead-letters, support replays it with a
// reason, and it succeeds.
func (s *story) deadLetter(ctx context.Context) error {
	dead, err := s.jobID(ctx)
	if err != nil {
		return err
	}
	for i, stage := range []string{"failed", "failed", "dead_lettered"} {
		d := map[string]any{"kind": "email.weekly-report", "stage": stage, "attempt": i + 1,
			"reason": "SMTP " + BounceDomain + " tidak merespons dalam 5 detik"}
		at := s.at(10, 7, []int{0, 2, 6}[i])
		s.system(at, "job."+stage, "job", strconv.FormatInt(dead, 10), d, &dead)
		// Every attempt failed; the last one also made a dead letter (the
		// rollup counts a dead letter among the failures, as the engine does).
		letters := int64(0)
		if stage == "dead_lettered" {
			letters = 1
		}
		s.jobStat(at, 0, 1, letters)
	}
	sid := s.support
	s.add(s.at(9, 10, 45), audit.Event{ActorKind: audit.ActorStaff, ActorID: &sid, Action: "job.replayed", Entity: "job",
		EntityID: strconv.FormatInt(dead, 10), JobID: &dead, Detail: detail(map[string]any{"kind": "email.weekly-report",
			"stage": "replayed", "attempt": 3, "reason": "Alamat e-mail pemilik sudah diperbaiki; kirim ulang laporan minggu ini"})})
	// The engine records how the replay ended (job.replay_succeeded).
	s.system(s.at(9, 10, 46), "job.replay_succeeded", "job", strconv.FormatInt(dead, 10), map[string]any{"kind": "email.weekly-report",
		"stage": "replay_succeeded", "attempt": 4, "replayed_by": strconv.FormatInt(sid, 10)}, &dead)
	s.jobStat(s.at(9, 10, 46), 1, 0, 0)
	return nil
}

// jobStat counts a seeded job attempt in the daily job rollup the owner's
// home charts read, as the engine would have when it ran: without it the
// home would say "0 dead letters" beside a trail that shows one.
func (s *story) jobStat(at time.Time, succeeded, failed, dead int64) {
	s.stats = append(s.stats, seededStat{at, [3]int64{succeeded, failed, dead}})
}

type seededStat struct {
	at time.Time
	n  [3]int64
}

// recordStats adds the seeded attempts to job_stats_day, on their day in
// the tenant's zone (the zone the chart's days are in).
func (s *story) recordStats(ctx context.Context) error {
	for _, st := range s.stats {
		if _, err := s.tx.Exec(ctx, `INSERT INTO job_stats_day AS d (tenant_id, day, succeeded, failed, dead)
			SELECT t.id, ($2::timestamptz AT TIME ZONE t.time_zone)::date, $3, $4, $5 FROM tenants t WHERE t.id = $1
			ON CONFLICT (tenant_id, day) DO UPDATE SET succeeded = d.succeeded + excluded.succeeded,
				failed = d.failed + excluded.failed, dead = d.dead + excluded.dead`,
			s.tenantID, st.at, st.n[0], st.n[1], st.n[2]); err != nil {
			return fmt.Errorf("job stats of %s: %w", st.at.Format(time.DateOnly), err)
		}
	}
	return nil
}

// upgrade: the owner moves back to the plan, and keeps signing in.
func (s *story) upgrade(ctx context.Context) error {
	s.signin(s.at(5, 9, 20), s.owner)
	if err := s.change(ctx, s.at(5, 9, 24), s.other, s.plan); err != nil {
		return err
	}
	s.signin(s.at(3, 8, 40), s.owner)
	s.signin(s.at(2, 16, 5), s.member)
	s.signin(s.at(1, 8, 30), s.owner)
	return nil
}

// membershipDates: memberships date from the story's invitations.
func (s *story) membershipDates(ctx context.Context) error {
	for _, m := range []struct {
		id   int64
		days int
	}{{s.owner, 42}, {s.member, 40}} {
		if _, err := s.tx.Exec(ctx, `UPDATE memberships SET created_at = $1 WHERE tenant_id = $2 AND user_id = $3`,
			s.at(m.days, 9, 0), s.tenantID, m.id); err != nil {
			return err
		}
	}
	_, err := s.tx.Exec(ctx, `UPDATE memberships m SET created_at = $1 FROM users u
		WHERE m.tenant_id = $2 AND m.user_id = u.id AND m.role = 'admin' AND u.email LIKE '%@%'`, s.at(37, 9, 0), s.tenantID)
	return err
}

// record writes the events in time order, each at its own time.
func (s *story) record(ctx context.Context) error {
	sort.SliceStable(s.evs, func(i, j int) bool { return s.evs[i].at.Before(s.evs[j].at) })
	clk := clock.NewFrozen(s.evs[0].at)
	rec := audit.NewRecorder(clk)
	for _, e := range s.evs {
		clk.Set(e.at)
		if err := rec.Append(ctx, s.tx, e.event); err != nil {
			return err
		}
	}
	return nil
}
