package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/mail"
	"github.com/jejakhq/jejak/internal/tenant"
)

// BounceDomain is the demo's unreachable mail domain: mail to it fails as
// an SMTP outage would, so weekly reports addressed there retry with
// backoff and end as dead letters.
const BounceDomain = "bounce.test"

// BounceMailer wraps a Mailer and fails, transiently, every message with a
// recipient at BounceDomain. Demo only.
type BounceMailer struct{ Next mail.Mailer }

// Send fails for BounceDomain recipients and delegates the rest.
func (b BounceMailer) Send(ctx context.Context, m mail.Message) error {
	for _, to := range m.To {
		if strings.HasSuffix(strings.ToLower(to), "@"+BounceDomain) {
			return fmt.Errorf("SMTP %s tidak merespons dalam 5 detik (demo outage)", BounceDomain)
		}
	}
	return b.Next.Send(ctx, m)
}

// Activity generates a realistic trickle of tenant activity so the
// dashboard has something to show: projects created and deleted, plan
// changes, system events, and jobs that succeed, retry and die.
type Activity struct {
	App, System *pgxpool.Pool
	Tenants     *tenant.Service
	Jobs        *job.Engine
	Log         *slog.Logger
	Rand        *rand.Rand       // nil = seeded from the time
	Now         func() time.Time // nil = time.Now

	started time.Time // the first Step's time: the first incident's start
}

// The generator stages an incident from its first step on and again every
// incidentEvery: for incidentLength the cashier's integration sends
// malformed awards (dead at once) and weekly reports go to a mail domain
// that never answers (dead after their retries), so dead letters grow,
// dead_letters_growing fires, and it resolves once the incident's last
// retries are over. Between incidents no job is made to fail: an alert
// that never stops firing shows an operator nothing.
const (
	incidentEvery  = 30 * time.Minute
	incidentLength = 5 * time.Minute
)

// inIncident reports whether now falls in one of the staged incidents.
func (a *Activity) inIncident(now time.Time) bool {
	if a.started.IsZero() {
		a.started = now
	}
	return now.Sub(a.started)%incidentEvery < incidentLength
}

// projectNames are what the generator creates; none is a seed project's
// name, so the seed's story projects stay unique.
var projectNames = []string{"Promo Hari Ibu", "Kemasan Ramah Lingkungan", "Kartu Ucapan", "Pameran Anggrek",
	"Kolaborasi Kopi Lokal", "Diskon Akhir Tahun", "Foto Produk Baru", "Bazar Ramadan", "Seragam Karyawan"}

// Run calls Step every interval until ctx ends, logging failures.
func (a *Activity) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.Step(ctx); err != nil && ctx.Err() == nil {
				a.Log.Warn("demo activity", "error", err.Error())
			}
		}
	}
}

type demoMember struct {
	id   int64
	role string
}

type demoTenant struct {
	id      int64
	slug    string
	members []demoMember // everyone, in user id order
	writers []demoMember // owners and admins
}

// Step performs one random action for a random demo tenant.
func (a *Activity) Step(ctx context.Context) error {
	if a.Rand == nil {
		a.Rand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	}
	if a.Now == nil {
		a.Now = time.Now
	}
	trouble := a.inIncident(a.Now())
	t, err := a.pickTenant(ctx)
	if err != nil {
		return err
	}
	// Changes are made by the members who may make them (owners, admins);
	// anyone, read-only members included, signs in and asks for reports.
	actor := tenant.Actor{UserID: t.writers[a.Rand.IntN(len(t.writers))].id, TraceID: newTrace(a.Rand)}
	actor.Role = t.roleOf(actor.UserID)
	anyone := t.members[a.Rand.IntN(len(t.members))]
	requester := tenant.Actor{UserID: anyone.id, Role: anyone.role, TraceID: actor.TraceID}
	switch r := a.Rand.IntN(100); {
	case r < 20:
		_, err = a.Tenants.CreateProject(ctx, t.id, actor, projectNames[a.Rand.IntN(len(projectNames))])
	case r < 30:
		err = a.deleteOldestProject(ctx, t, actor)
	case r < 33:
		err = a.changePlan(ctx, t, actor)
	case r < 36:
		err = a.Tenants.RecordSignIn(ctx, anyone.id, true, fmt.Sprintf("203.0.113.%d", 10+a.Rand.IntN(200)), actor.TraceID)
	case r < 40:
		err = a.systemExport(ctx, t)
	case r < 60 || (r < 67 && !trouble):
		err = a.enqueue(ctx, t, "email.weekly-report", map[string]any{"tenant_id": t.id}, requester)
	case r < 67:
		// An owner address at the bounce domain: retried with backoff, then dead.
		err = a.enqueue(ctx, t, "email.weekly-report", map[string]any{"tenant_id": t.id, "to": []string{"laporan@" + BounceDomain}}, actor)
	case r < 90 || (r < 95 && !trouble):
		err = a.enqueue(ctx, t, "points.award", map[string]any{"tenant_id": t.id, "message_id": newTrace(a.Rand),
			"customer": fmt.Sprintf("pelanggan-%d", a.Rand.IntN(40)), "points": 1 + a.Rand.IntN(50), "reason": "pembelian"}, actor)
	case r < 95:
		// A malformed award (zero points): a permanent failure, dead at once.
		err = a.enqueue(ctx, t, "points.award", map[string]any{"tenant_id": t.id, "message_id": newTrace(a.Rand),
			"customer": "pelanggan-0", "points": 0, "reason": "data rusak dari kasir"}, actor)
	default:
		err = a.enqueue(ctx, t, "subscription.sweep", map[string]any{"tenant_id": t.id}, actor)
	}
	return err
}

func (t demoTenant) roleOf(id int64) string {
	for _, m := range t.members {
		if m.id == id {
			return m.role
		}
	}
	return ""
}

func (a *Activity) pickTenant(ctx context.Context) (demoTenant, error) {
	slug := Tenants[a.Rand.IntN(len(Tenants))].Slug
	t := demoTenant{slug: slug}
	rows, err := a.System.Query(ctx, `SELECT t.id, m.user_id, m.role FROM tenants t
		JOIN memberships m ON m.tenant_id = t.id
		JOIN users u ON u.id = m.user_id AND u.active
		WHERE t.slug = $1 ORDER BY m.user_id`, slug)
	if err != nil {
		return t, fmt.Errorf("demo tenant %s: %w", slug, err)
	}
	defer rows.Close()
	for rows.Next() {
		var m demoMember
		if err := rows.Scan(&t.id, &m.id, &m.role); err != nil {
			return t, fmt.Errorf("demo tenant %s: %w", slug, err)
		}
		t.members = append(t.members, m)
		if m.role == tenant.RoleOwner || m.role == tenant.RoleAdmin {
			t.writers = append(t.writers, m)
		}
	}
	if err := rows.Err(); err != nil {
		return t, fmt.Errorf("demo tenant %s: %w", slug, err)
	}
	if len(t.writers) == 0 {
		return t, fmt.Errorf("demo tenant %s has no owner", slug)
	}
	return t, nil
}

// changePlan moves the tenant to a plan other than its current one (the
// service refuses a change that changes nothing).
func (a *Activity) changePlan(ctx context.Context, t demoTenant, actor tenant.Actor) error {
	_, plan, err := a.Tenants.Home(ctx, t.id, 0)
	if err != nil {
		return err
	}
	var choices []string
	for _, c := range tenant.PlanCodes {
		if plan == nil || c != plan.Code {
			choices = append(choices, c)
		}
	}
	return a.Tenants.ChangePlan(ctx, t.id, actor, choices[a.Rand.IntN(len(choices))])
}

// deleteOldestProject keeps project lists from growing without bound. It
// spares the seed's own projects (such as Melati's "Katalog Musim Hujan"),
// which the README's walkthrough relies on.
func (a *Activity) deleteOldestProject(ctx context.Context, t demoTenant, actor tenant.Actor) error {
	ps, err := a.Tenants.Projects(ctx, t.id)
	if err != nil {
		return err
	}
	seeded := map[string]bool{}
	for _, st := range Tenants {
		if st.Slug == t.slug {
			for _, n := range st.Projects {
				seeded[n] = true
			}
		}
	}
	for i := len(ps) - 1; i >= 0; i-- { // oldest first
		if !seeded[ps[i].Name] {
			_, err = a.Tenants.DeleteProject(ctx, t.id, actor, ps[i].ID)
			return err
		}
	}
	return nil
}

func (a *Activity) systemExport(ctx context.Context, t demoTenant) error {
	detail, _ := json.Marshal(map[string]any{"tables": []string{"projects", "memberships"}})
	return database.InTenantTx(ctx, a.App, t.id, func(tx pgx.Tx) error {
		err := audit.NewRecorder(clock.Database{}).Append(ctx, tx, audit.Event{TenantID: t.id, ActorKind: audit.ActorSystem,
			Action: "system.daily-export", Entity: "tenant", EntityID: fmt.Sprint(t.id), Detail: detail, TraceID: newTrace(a.Rand)})
		return err
	})
}

func (a *Activity) enqueue(ctx context.Context, t demoTenant, kind string, payload map[string]any, actor tenant.Actor) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	uid := actor.UserID
	return database.InTenantTx(ctx, a.App, t.id, func(tx pgx.Tx) error {
		_, err := a.Jobs.Enqueue(ctx, tx, job.EnqueueParams{TenantID: t.id, Kind: kind, Payload: b, TraceID: actor.TraceID, RequestedBy: &uid})
		if errors.Is(err, job.ErrInvalidPayload) {
			return fmt.Errorf("demo payload for %s: %w", kind, err)
		}
		return err
	})
}

func newTrace(r *rand.Rand) string {
	return fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())
}
