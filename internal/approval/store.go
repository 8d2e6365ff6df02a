package approval

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/queries"
)

// store wraps the sqlc queries of approvals and the rows the
// user.disable-access effect changes, converting rows to domain values.
type store struct{ q *queries.Queries }

func newStore(db queries.DBTX) store { return store{q: queries.New(db)} }

// member is a membership as a request sees it.
type member struct {
	Role     string
	Disabled bool
}

func (s store) membership(ctx context.Context, tenantID, userID int64) (member, error) {
	m, err := s.q.MembershipGet(ctx, queries.MembershipGetParams{TenantID: tenantID, UserID: userID})
	if errors.Is(err, pgx.ErrNoRows) {
		return member{}, ErrNoMember
	}
	if err != nil {
		return member{}, fmt.Errorf("read membership: %w", err)
	}
	return member{Role: m.Role, Disabled: m.DisabledAt != nil}, nil
}

// staffRole returns the user's staff role when active ("" otherwise).
func (s store) staffRole(ctx context.Context, userID int64) (string, error) {
	u, err := s.q.UserGetByID(ctx, userID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read staff member: %w", err)
	}
	if !u.Active || u.StaffRole == nil {
		return "", nil
	}
	return *u.StaffRole, nil
}

func (s store) pendingFor(ctx context.Context, tenantID int64, action string, target int64) (int64, error) {
	return s.q.ApprovalPendingFor(ctx, queries.ApprovalPendingForParams{TenantID: tenantID, Action: action, TargetID: target})
}

func (s store) insert(ctx context.Context, a Approval) (*Approval, error) {
	r, err := s.q.ApprovalInsert(ctx, queries.ApprovalInsertParams{
		TenantID: a.TenantID, Action: a.Action, TargetID: a.TargetID, Reason: a.Reason, RequestedBy: a.RequestedBy,
		RequestedAt: a.RequestedAt, ExpiresAt: a.ExpiresAt, TraceID: a.TraceID,
	})
	if err != nil {
		return nil, fmt.Errorf("insert approval: %w", err)
	}
	return fromRow(r), nil
}

func (s store) lock(ctx context.Context, id int64) (*Approval, error) {
	r, err := s.q.ApprovalLock(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("lock approval %d: %w", id, err)
	}
	return fromRow(r), nil
}

func (s store) decide(ctx context.Context, id int64, state string, by int64, at time.Time, reason *string) (*Approval, error) {
	r, err := s.q.ApprovalDecide(ctx, queries.ApprovalDecideParams{State: state, DecidedBy: &by, DecidedAt: &at,
		DecisionReason: reason, ID: id})
	if err != nil {
		return nil, fmt.Errorf("decide approval %d: %w", id, err)
	}
	return fromRow(r), nil
}

func (s store) setJob(ctx context.Context, id, jobID int64) error {
	if err := s.q.ApprovalSetJob(ctx, queries.ApprovalSetJobParams{ID: id, JobID: &jobID}); err != nil {
		return fmt.Errorf("link approval %d to job: %w", id, err)
	}
	return nil
}

// consumeNow marks an approval used by the action it approved (a replay
// runs at approval, not at a later dequeue).
func (s store) consumeNow(ctx context.Context, id, by int64, at time.Time) error {
	_, err := s.q.ApprovalConsume(ctx, queries.ApprovalConsumeParams{Now: &at, JobID: &by, ID: id})
	return err
}

func (s store) get(ctx context.Context, id int64) (*Approval, error) {
	r, err := s.q.ApprovalGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get approval %d: %w", id, err)
	}
	return fromRow(r), nil
}

func (s store) listPending(ctx context.Context, limit int) ([]Approval, error) {
	return many(s.q.ApprovalListPending(ctx, int32(limit)))
}

func (s store) listRecent(ctx context.Context, limit int) ([]Approval, error) {
	return many(s.q.ApprovalListRecent(ctx, int32(limit)))
}

func (s store) listByTenant(ctx context.Context, tenantID int64, limit int) ([]Approval, error) {
	return many(s.q.ApprovalListByTenant(ctx, queries.ApprovalListByTenantParams{TenantID: tenantID, Limit: int32(limit)}))
}

// disableMembership disables a membership; false when it was disabled
// already or is absent.
func (s store) disableMembership(ctx context.Context, tenantID, userID int64, at time.Time, reason string) (bool, error) {
	_, err := s.q.MembershipDisable(ctx, queries.MembershipDisableParams{TenantID: tenantID, UserID: userID, DisabledAt: &at, DisabledReason: &reason})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("disable membership: %w", err)
	}
	return true, nil
}

// revokeSessions deletes the user's server-side sessions.
func (s store) revokeSessions(ctx context.Context, userID int64) (int64, error) {
	n, err := s.q.UserSessionsRevoke(ctx, userID)
	if err != nil {
		return 0, fmt.Errorf("revoke sessions of user %d: %w", userID, err)
	}
	return n, nil
}

func many(rows []queries.Approval, err error) ([]Approval, error) {
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	out := make([]Approval, len(rows))
	for i, r := range rows {
		out[i] = *fromRow(r)
	}
	return out, nil
}

func fromRow(r queries.Approval) *Approval {
	a := &Approval{ID: r.ID, TenantID: r.TenantID, Action: r.Action, TargetID: r.TargetID, Reason: r.Reason,
		RequestedBy: r.RequestedBy, RequestedAt: r.RequestedAt, ExpiresAt: r.ExpiresAt, State: r.State,
		DecidedBy: r.DecidedBy, DecidedAt: r.DecidedAt, JobID: r.JobID, ConsumedAt: r.ConsumedAt,
		ConsumedByJob: r.ConsumedByJob, TraceID: r.TraceID}
	if r.DecisionReason != nil {
		a.DecisionReason = *r.DecisionReason
	}
	return a
}

// refreshExpiry gives a dead sensitive job a new expiry before its
// approved replay.
func (s store) refreshExpiry(ctx context.Context, tenantID, jobID int64, at time.Time) error {
	return s.q.JobRefreshExpiry(ctx, queries.JobRefreshExpiryParams{TenantID: tenantID, ID: jobID, ExpiresAt: &at})
}

// otherActiveOwners counts the tenant's active owners other than userID.
func (s store) otherActiveOwners(ctx context.Context, tenantID, userID int64) (int64, error) {
	return s.q.ApprovalOtherActiveOwners(ctx, queries.ApprovalOtherActiveOwnersParams{TenantID: tenantID, UserID: userID})
}

// liftDisable clears a membership's disable; it returns the reason it had.
func (s store) liftDisable(ctx context.Context, tenantID, userID int64) (string, error) {
	was, err := s.q.MembershipLiftDisable(ctx, queries.MembershipLiftDisableParams{TenantID: tenantID, UserID: userID})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotDisabled
	}
	if err != nil {
		return "", fmt.Errorf("lift disable: %w", err)
	}
	return was, nil
}
