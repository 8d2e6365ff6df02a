package tenant

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// PlanHook runs inside a plan change's transaction, after the change and
// its audit event: payments create the invoice and enqueue its charge
// there, so a charge exists if and only if the change commits.
type PlanHook func(ctx context.Context, tx pgx.Tx, tenantID int64, actorID *int64, toPlan, traceID string) error

// SetPlanHook installs h (nil removes it). Call it while wiring, before
// the service serves requests.
func (s *Service) SetPlanHook(h PlanHook) { s.planHook = h }

func (s *Service) planChanged(ctx context.Context, tx pgx.Tx, tenantID int64, actor Actor, toPlan string) error {
	if s.planHook == nil {
		return nil
	}
	uid := actor.UserID
	return s.planHook(ctx, tx, tenantID, &uid, toPlan, actor.TraceID)
}
