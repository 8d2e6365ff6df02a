package billing

import (
	"context"
	"errors"
	"fmt"

	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/kinds/payload"
)

// SweepKind is the job kind that recomputes subscription statuses.
const SweepKind = "subscription.sweep"

// ErrCrossTenantSweep: a sweep of all tenants was requested by a user.
// Only system jobs (no requester) may act across tenants.
var ErrCrossTenantSweep = errors.New("billing: only system jobs may sweep all tenants")

// SweepHandler runs subscription.sweep jobs.
type SweepHandler struct {
	// App is the jejak_app pool: a single-tenant sweep runs under
	// row-level security pinned to the job's tenant.
	App database.Beginner
	// System is the jejak_system pool, used only for all_tenants sweeps;
	// nil disables them.
	System  database.Beginner
	Service *Service
}

// sweepPayload is subscription.sweep's JSON payload. tenant_id is always
// the job's tenant; all_tenants widens a system job to every tenant.
type sweepPayload struct {
	TenantID   int64 `json:"tenant_id"`
	AllTenants bool  `json:"all_tenants"`
}

// Handle is the job.Handler for subscription.sweep.
func (h *SweepHandler) Handle(ctx context.Context, j *job.Job) error {
	var p sweepPayload
	if err := payload.Decode(j, &p); err != nil {
		return err
	}
	jobID := &j.ID
	if p.AllTenants {
		if j.RequestedBy != nil {
			return job.Policy(fmt.Errorf("subscription.sweep job %d requested by user %d: %w", j.ID, *j.RequestedBy, ErrCrossTenantSweep))
		}
		if h.System == nil {
			return job.Permanent(fmt.Errorf("subscription.sweep job %d: all_tenants needs the system pool, which is not configured", j.ID))
		}
		return database.InTx(ctx, h.System, func(tx pgx.Tx) error {
			changes, err := h.Service.SweepAll(ctx, tx, jobID)
			if err != nil {
				return err
			}
			return h.Service.recordChanges(ctx, tx, j, changes)
		})
	}
	return database.InTenantTx(ctx, h.App, j.TenantID, func(tx pgx.Tx) error {
		changes, err := h.Service.Sweep(ctx, tx, j.TenantID, jobID)
		if err != nil {
			return err
		}
		return h.Service.recordChanges(ctx, tx, j, changes)
	})
}

// recordChanges writes each status change in its tenant's trail, with the
// system as actor, in the sweep's transaction.
func (s *Service) recordChanges(ctx context.Context, tx pgx.Tx, j *job.Job, changes []StatusChange) error {
	rec := audit.NewRecorder(s.clock)
	for _, c := range changes {
		if err := rec.RecordWork(ctx, tx, audit.WorkDone{TenantID: c.TenantID, Action: "subscription.status_changed",
			Entity: "subscription", EntityID: strconv.FormatInt(c.TenantID, 10), TraceID: j.TraceID, JobID: j.ID,
			Detail: map[string]any{"from_status": string(c.FromStatus), "to_status": string(c.ToStatus)}}); err != nil {
			return err
		}
	}
	return nil
}
