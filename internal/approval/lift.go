package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/staff"
)

// Errors of lifting a staff disable.
var (
	ErrAdminsOnly  = staff.ErrNotPermitted
	ErrNotDisabled = &apperr.Error{Code: apperr.CodeConflict, Message: "This member's access is not disabled."}
)

// LiftDisable gives userID's access to tenantID back after a staff disable:
// admin staff only (staff.LiftDisable), with a reason, recorded as
// member.access_restored in the tenant's trail. Until then the tenant's
// owners can neither remove the membership nor invite or add the person
// again (internal/member), so a staff decision is undone only by staff.
func (s *Service) LiftDisable(ctx context.Context, by Staff, tenantID, userID int64, reason string) error {
	reason, err := CheckReason(reason)
	if err != nil {
		return err
	}
	return database.InTx(ctx, s.system, func(tx pgx.Tx) error {
		st := newStore(tx)
		if err := requirePermission(ctx, st, by.UserID, staff.LiftDisable); err != nil {
			return err
		}
		m, err := st.membership(ctx, tenantID, userID)
		if err != nil {
			return err
		}
		if !m.Disabled {
			return ErrNotDisabled
		}
		was, err := st.liftDisable(ctx, tenantID, userID)
		if err != nil {
			return err
		}
		detail, _ := json.Marshal(map[string]any{"user_id": userID, "reason": reason, "disabled_reason": was})
		actor := by.UserID
		if err := s.rec.Append(ctx, tx, audit.Event{
			TenantID: tenantID, ActorKind: audit.ActorStaff, ActorID: &actor, Action: "member.access_restored",
			Entity: "user", EntityID: strconv.FormatInt(userID, 10), Detail: detail, TraceID: by.TraceID,
		}); err != nil {
			return fmt.Errorf("audit access restored: %w", err)
		}
		return nil
	})
}

// requirePermission refuses a user whose staff role lacks p: ErrNotStaff
// for non-staff, ErrAdminsOnly for staff without it.
func requirePermission(ctx context.Context, st store, userID int64, p staff.Permission) error {
	role, err := st.staffRole(ctx, userID)
	if err != nil {
		return err
	}
	switch {
	case role == "":
		return ErrNotStaff
	case !staff.Can(role, p):
		return ErrAdminsOnly
	}
	return nil
}
