// Package support is the staff's view of one tenant (SPEC D10, A9): tenant
// search, and a tenant's members, plan and status history, recent jobs,
// approvals and audit trail. Every staff read of a tenant's trail is
// itself recorded in that trail (staff.viewed_audit), at most once per
// staff member, tenant and hour, so owners see who looked at their data.
package support

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/billing"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/queries"
	"github.com/jejakhq/jejak/internal/sensitive"
)

// ErrNotFound: no tenant with that slug.
var ErrNotFound = apperr.NotFound("tenant not found")

// TenantSummary is one search result.
type TenantSummary struct {
	ID      int64
	Slug    string
	Name    string
	Plan    string
	Status  string
	Members int64
}

// Member is a user's membership as staff see it.
type Member struct {
	UserID         int64
	Name           string
	Email          string
	Role           string
	Since          time.Time
	DisabledAt     *time.Time
	DisabledReason string
	UserActive     bool
}

// Job is one of the tenant's recent jobs.
type Job struct {
	ID          int64
	Kind        string
	State       string
	Attempt     int
	MaxAttempts int
	CreatedAt   time.Time
	FinishedAt  *time.Time
	LastError   string
	TraceID     string
}

// Tenant is everything the staff tenant page shows.
type Tenant struct {
	ID            int64
	Slug          string
	Name          string
	TimeZone      string
	Members       []Member
	Subscription  *billing.Subscription
	PlanChanges   []billing.Change
	StatusChanges []billing.StatusChange
	Jobs          []Job
	Audit         audit.Page
}

// Service reads tenants for staff on the system pool.
type Service struct {
	system database.Pool
	clock  clock.Clock
	rec    *audit.Recorder
}

// NewService returns a Service.
func NewService(system database.Pool, c clock.Clock) *Service {
	if c == nil {
		c = clock.Database{}
	}
	return &Service{system: system, clock: c, rec: audit.NewRecorder(c)}
}

// MaxSearch caps one search answer.
const MaxSearch = 100

// Search finds tenants whose slug or name contains q ("" = all), by slug.
func (s *Service) Search(ctx context.Context, q string) ([]TenantSummary, error) {
	if len(q) > 200 {
		return nil, apperr.Invalid("q", "Search for at most 200 characters.")
	}
	rows, err := queries.New(s.system).SupportTenantSearch(ctx, queries.SupportTenantSearchParams{Q: q, Lim: MaxSearch})
	if err != nil {
		return nil, fmt.Errorf("search tenants: %w", err)
	}
	out := make([]TenantSummary, len(rows))
	for i, r := range rows {
		out[i] = TenantSummary{ID: r.ID, Slug: r.Slug, Name: r.Name, Members: r.Members}
		if r.PlanCode != nil {
			out[i].Plan = *r.PlanCode
		}
		if r.Status != nil {
			out[i].Status = *r.Status
		}
	}
	return out, nil
}

// TenantBySlug resolves a slug (ErrNotFound).
func (s *Service) TenantBySlug(ctx context.Context, slug string) (int64, string, error) {
	t, err := queries.New(s.system).TenantGetBySlug(ctx, slug)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", ErrNotFound
	}
	if err != nil {
		return 0, "", fmt.Errorf("get tenant %s: %w", slug, err)
	}
	return t.ID, t.Name, nil
}

// Read returns the staff page of the tenant with slug, its trail filtered
// by f from cursor, and records staffID's read of the trail (once an
// hour) in the same transaction.
func (s *Service) Read(ctx context.Context, staffID int64, traceID, slug string, f audit.Filter, before *audit.Cursor, limit int) (*Tenant, error) {
	var out *Tenant
	err := database.InTx(ctx, s.system, func(tx pgx.Tx) error {
		q := queries.New(tx)
		tr, err := q.TenantGetBySlug(ctx, slug)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("get tenant %s: %w", slug, err)
		}
		t := &Tenant{ID: tr.ID, Slug: tr.Slug, Name: tr.Name, TimeZone: tr.TimeZone}
		if err := s.recordView(ctx, tx, t.ID, staffID, traceID, f); err != nil {
			return err
		}
		ms, err := q.SupportTenantMembers(ctx, t.ID)
		if err != nil {
			return fmt.Errorf("list members: %w", err)
		}
		for _, m := range ms {
			mm := Member{UserID: m.UserID, Name: m.Name, Email: m.Email, Role: m.Role, Since: m.CreatedAt,
				DisabledAt: m.DisabledAt, UserActive: m.Active}
			if m.DisabledReason != nil {
				mm.DisabledReason = *m.DisabledReason
			}
			t.Members = append(t.Members, mm)
		}
		if sub, err := billing.Get(ctx, tx, t.ID); err == nil {
			t.Subscription = &sub
		} else if !errors.Is(err, billing.ErrNotFound) {
			return err
		}
		if t.PlanChanges, err = billing.ListChanges(ctx, tx, t.ID); err != nil {
			return err
		}
		if t.StatusChanges, err = billing.ListStatusChanges(ctx, tx, t.ID); err != nil {
			return err
		}
		js, err := q.SupportTenantJobs(ctx, queries.SupportTenantJobsParams{TenantID: t.ID, Limit: 20})
		if err != nil {
			return fmt.Errorf("list jobs: %w", err)
		}
		for _, j := range js {
			jj := Job{ID: j.ID, Kind: j.Kind, State: j.State, Attempt: int(j.Attempt), MaxAttempts: int(j.MaxAttempts),
				CreatedAt: j.CreatedAt, FinishedAt: j.FinishedAt, TraceID: j.TraceID}
			if j.LastError != nil {
				jj.LastError = *j.LastError
			}
			t.Jobs = append(t.Jobs, jj)
		}
		if t.Audit, err = audit.Timeline(ctx, tx, t.ID, f, before, limit); err != nil {
			return err
		}
		out = t
		return nil
	})
	return out, err
}

// recordView writes staff.viewed_audit unless this staff member already
// read this tenant's trail in the current hour: the insert that wins the
// hour's row records the event, so concurrent reads record it once.
func (s *Service) recordView(ctx context.Context, tx pgx.Tx, tenantID, staffID int64, traceID string, f audit.Filter) error {
	now, err := sensitive.Now(ctx, tx, s.clock)
	if err != nil {
		return err
	}
	_, err = queries.New(tx).StaffAuditViewClaim(ctx, queries.StaffAuditViewClaimParams{
		TenantID: tenantID, StaffID: staffID, Hour: now.UTC().Truncate(time.Hour),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // already recorded this hour
	}
	if err != nil {
		return fmt.Errorf("record staff view: %w", err)
	}
	detail := map[string]any{"hour": now.UTC().Truncate(time.Hour).Format(time.RFC3339)}
	if f.Action != "" {
		detail["filter_action"] = f.Action
	}
	if f.Entity != "" {
		detail["filter_entity"] = f.Entity
	}
	raw, _ := json.Marshal(detail)
	_, err = s.rec.Record(ctx, tx, audit.Event{
		TenantID: tenantID, ActorKind: audit.ActorStaff, ActorID: &staffID, Action: "staff.viewed_audit",
		Entity: "audit", EntityID: strconv.FormatInt(tenantID, 10), Detail: raw, TraceID: traceID,
	})
	if err != nil {
		return fmt.Errorf("audit staff view: %w", err)
	}
	return nil
}
