package member

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/queries"
	"github.com/jejakhq/jejak/internal/tenant"
)

// This file is the only one that touches the generated queries.

type store struct{ q *queries.Queries }

func newStore(db queries.DBTX) store { return store{queries.New(db)} }

func (s store) members(ctx context.Context, tenantID int64) ([]Member, error) {
	rows, err := s.q.MemberList(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	out := make([]Member, len(rows))
	for i, r := range rows {
		out[i] = Member{UserID: r.UserID, Name: r.Name, Email: r.Email, Role: r.Role, Since: r.CreatedAt, DisabledByStaff: r.DisabledAt != nil}
	}
	return out, nil
}

func (s store) member(ctx context.Context, tenantID, userID int64) (Member, error) {
	ms, err := s.members(ctx, tenantID)
	if err != nil {
		return Member{}, err
	}
	for _, m := range ms {
		if m.UserID == userID {
			return m, nil
		}
	}
	return Member{}, ErrNotFound
}

// memberByEmail returns the membership of the user with that e-mail, if any.
func (s store) memberByEmail(ctx context.Context, tenantID int64, email string) (Member, bool, error) {
	u, err := s.q.MemberUserByEmail(ctx, email)
	if errors.Is(err, pgx.ErrNoRows) {
		return Member{}, false, nil
	}
	if err != nil {
		return Member{}, false, err
	}
	m, err := s.member(ctx, tenantID, u.ID)
	if errors.Is(err, ErrNotFound) {
		return Member{}, false, nil
	}
	return m, err == nil, err
}

func (s store) pending(ctx context.Context, tenantID int64) ([]Invitation, error) {
	rows, err := s.q.InvitationListPending(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	out := make([]Invitation, len(rows))
	for i, r := range rows {
		out[i] = Invitation{ID: r.ID, Email: r.Email, Role: r.Role, InvitedBy: r.InvitedByName, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

func (s store) invite(ctx context.Context, tenantID int64, email, role string, by int64, now *time.Time) (*Invitation, error) {
	r, err := s.q.InvitationInsert(ctx, queries.InvitationInsertParams{TenantID: tenantID, Email: email, Role: role, InvitedBy: &by, Now: now})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrPending
	}
	if err != nil {
		return nil, err
	}
	return &Invitation{ID: r.ID, Email: email, Role: role, CreatedAt: r.CreatedAt}, nil
}

func (s store) remove(ctx context.Context, tenantID, userID int64) error {
	_, err := s.q.MemberDelete(ctx, queries.MemberDeleteParams{TenantID: tenantID, UserID: userID})
	if errors.Is(err, pgx.ErrNoRows) {
		// Gone, or disabled by staff since it was read (the delete
		// skips a disabled row).
		return tenant.ErrStaffDisabled
	}
	return err
}

// disabled reports whether userID's membership exists and staff disabled it.
func (s store) disabled(ctx context.Context, tenantID, userID int64) (bool, error) {
	ms, err := s.members(ctx, tenantID)
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.UserID == userID {
			return m.DisabledByStaff, nil
		}
	}
	return false, nil
}

func (s store) revoke(ctx context.Context, tenantID, id int64, now *time.Time) (string, error) {
	email, err := s.q.InvitationRevoke(ctx, queries.InvitationRevokeParams{Now: now, TenantID: tenantID, ID: id})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	return email, err
}

func (s store) invitedFor(ctx context.Context, email string) ([]Invited, error) {
	rows, err := s.q.InvitationListForEmail(ctx, email)
	if err != nil {
		return nil, err
	}
	out := make([]Invited, len(rows))
	for i, r := range rows {
		out[i] = Invited{ID: r.ID, TenantSlug: r.Slug, TenantName: r.TenantName, Role: r.Role,
			InvitedBy: r.InvitedByName, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

func (s store) accept(ctx context.Context, id int64, email string, now *time.Time) (tenantID int64, role string, err error) {
	r, err := s.q.InvitationAccept(ctx, queries.InvitationAcceptParams{Now: now, ID: id, Email: email})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", ErrNotFound
	}
	return r.TenantID, r.Role, err
}

func (s store) add(ctx context.Context, tenantID, userID int64, role string) (bool, error) {
	n, err := s.q.MemberAdd(ctx, queries.MemberAddParams{TenantID: tenantID, UserID: userID, Role: role})
	return n > 0, err
}
