// Package support is the staff's view of one tenant: tenant
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
	return search(ctx, s.system, q)
}

// Read returns the staff page of the tenant with slug, its trail filtered
// by f from cursor, and records staffID's read of the trail (once an
// hour) in the same transaction.
func (s *Service) Read(ctx context.Context, staffID int64, traceID, slug string, f audit.Filter, beforeSeq int64, limit int) (*Tenant, error) {
	var out *Tenant
	err := database.InTx(ctx, s.system, func(tx pgx.Tx) error {
		t, err := tenantBySlug(ctx, tx, slug)
		if err != nil {
			return err
		}
		if err := s.recordView(ctx, tx, t.ID, staffID, traceID, "/admin/tenants/"+t.Slug, f); err != nil {
			return err
		}
		if t.Members, err = members(ctx, tx, t.ID); err != nil {
			return err
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
		if t.Jobs, err = recentJobs(ctx, tx, t.ID, 20); err != nil {
			return err
		}
		if t.Audit, err = audit.Timeline(ctx, tx, t.ID, f, beforeSeq, limit); err != nil {
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
func (s *Service) recordView(ctx context.Context, tx pgx.Tx, tenantID, staffID int64, traceID, page string, f audit.Filter) error {
	now, err := sensitive.Now(ctx, tx, s.clock)
	if err != nil {
		return err
	}
	first, err := claimViewHour(ctx, tx, tenantID, staffID, now.UTC().Truncate(time.Hour))
	if err != nil || !first {
		return err // !first: already recorded this hour
	}
	detail := map[string]any{"hour": now.UTC().Truncate(time.Hour).Format(time.RFC3339), "page": page}
	if f.Action != "" {
		detail["filter_action"] = f.Action
	}
	if f.Entity != "" {
		detail["filter_entity"] = f.Entity
	}
	raw, _ := json.Marshal(detail)
	err = s.rec.Append(ctx, tx, audit.Event{
		TenantID: tenantID, ActorKind: audit.ActorStaff, ActorID: &staffID, Action: "staff.viewed_audit",
		Entity: "audit", EntityID: strconv.FormatInt(tenantID, 10), Detail: raw, TraceID: traceID,
	})
	if err != nil {
		return fmt.Errorf("audit staff view: %w", err)
	}
	return nil
}

// RecordViews records staffID's read of the trails of the given tenants
// (other staff pages that show audit events: a job's page, trace search),
// once per tenant and hour like Read does.
func (s *Service) RecordViews(ctx context.Context, staffID int64, traceID, page string, tenantIDs []int64) error {
	seen := map[int64]bool{}
	for _, id := range tenantIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		err := database.InTx(ctx, s.system, func(tx pgx.Tx) error {
			return s.recordView(ctx, tx, id, staffID, traceID, page, audit.Filter{})
		})
		if err != nil {
			return err
		}
	}
	return nil
}
