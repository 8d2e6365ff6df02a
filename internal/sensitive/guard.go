package sensitive

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/job"
)

// Grant is what a job claims authorizes it: the approval it carries and
// what that approval must be about.
type Grant struct {
	ApprovalID int64
	Action     string // the approval's action, e.g. "user.disable-access"
	TargetID   int64  // the approval's target (user id, job id)
	// Roles are the staff roles requester and approver must still hold.
	Roles []string
}

// Approval is the approval a job consumed.
type Approval struct {
	ID          int64
	RequestedBy int64
	DecidedBy   int64
	Reason      string
}

// Authorize re-checks, inside the handler's transaction and before any
// effect, everything that authorized the job at enqueue: the
// job has not expired and its payload is unchanged; the approval exists
// for this tenant, action and target, is approved, and is consumed now
// (single use: a second job with the same approval is refused); its
// requester is the job's requester; requester and approver still exist,
// are active and hold one of g.Roles. Any failure is a policy failure
// naming the reason; the handler returns it and nothing is changed.
func Authorize(ctx context.Context, tx pgx.Tx, now time.Time, j *job.Job, g Grant) (Approval, error) {
	if j.ExpiresAt == nil {
		return Approval{}, reject(ReasonExpired, "sensitive job has no expiry")
	}
	if !now.Before(*j.ExpiresAt) {
		return Approval{}, reject(ReasonExpired, "expired at %s", j.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if !j.VerifyPayload() {
		return Approval{}, reject(ReasonPayloadTampered, "payload hash does not match the enqueued payload")
	}
	a, err := lockApproval(ctx, tx, g.ApprovalID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Approval{}, reject(ReasonApprovalMissing, "approval %d does not exist", g.ApprovalID)
	}
	if err != nil {
		return Approval{}, fmt.Errorf("read approval %d: %w", g.ApprovalID, err)
	}
	if a.TenantID != j.TenantID || a.Action != g.Action || a.TargetID != g.TargetID {
		return Approval{}, reject(ReasonApprovalMismatch, "approval %d is for %s %d in another scope", a.ID, a.Action, a.TargetID)
	}
	if a.State != "approved" || a.DecidedBy == nil {
		return Approval{}, reject(ReasonNotApproved, "approval %d is %s", a.ID, a.State)
	}
	if a.ConsumedAt != nil {
		return Approval{}, reject(ReasonApprovalConsumed, "approval %d was used by job %s", a.ID, jobRef(a.ConsumedByJob))
	}
	if j.RequestedBy == nil || *j.RequestedBy != a.RequestedBy {
		return Approval{}, reject(ReasonApprovalMismatch, "job requester is not the approval's requester")
	}
	if err := checkStaff(ctx, tx, a.RequestedBy, g.Roles, ReasonRequesterGone, ReasonRequesterRole); err != nil {
		return Approval{}, err
	}
	if err := checkStaff(ctx, tx, *a.DecidedBy, g.Roles, ReasonApproverGone, ReasonApproverRole); err != nil {
		return Approval{}, err
	}
	if err := consumeApproval(ctx, tx, a.ID, j.ID, now); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Approval{}, reject(ReasonApprovalConsumed, "approval %d was used meanwhile", a.ID)
		}
		return Approval{}, fmt.Errorf("consume approval %d: %w", a.ID, err)
	}
	return Approval{ID: a.ID, RequestedBy: a.RequestedBy, DecidedBy: *a.DecidedBy, Reason: a.Reason}, nil
}

func checkStaff(ctx context.Context, tx pgx.Tx, id int64, roles []string, gone, lost string) error {
	u, err := getStaff(ctx, tx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return reject(gone, "user %d no longer exists", id)
	}
	if err != nil {
		return fmt.Errorf("read user %d: %w", id, err)
	}
	if !u.Active {
		return reject(gone, "user %d is deactivated", id)
	}
	if u.Role == nil || !slices.Contains(roles, *u.Role) {
		return reject(lost, "user %d no longer holds a staff role allowed to do this", id)
	}
	return nil
}

func jobRef(id *int64) string {
	if id == nil {
		return "?"
	}
	return strconv.FormatInt(*id, 10)
}
