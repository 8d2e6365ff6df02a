// Package member is a tenant's team as its owners manage it: the member
// list, invitations (sent through the mailer), role changes and removals.
// Every change is recorded in the tenant's audit trail in the change's own
// transaction; reads and writes run in the tenant's scope
// (database.InTenantTx), so row-level security backs each query's filter.
package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/mail"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/user"
)

// Errors returned by the service (messages are catalog keys, shown in the
// reader's language).
var (
	ErrOwnersOnly    = apperr.Forbidden("Only owners can change the team.")
	ErrBadEmail      = apperr.Invalid("email", "Enter an e-mail address like name@example.com.")
	ErrAlreadyMember = apperr.Invalid("email", "That person is already a member.")
	ErrPending       = apperr.Invalid("email", "That address already has a pending invitation.")
	ErrInviteRole    = apperr.Invalid("role", "Invite as admin or member.")
	ErrRemoveSelf    = apperr.Invalid("user", "Owners cannot remove themselves.")
	ErrSameRole      = apperr.Invalid("role", "That is already their role.")
	// ErrInviteDisabled: staff disabled this person's access; inviting
	// them again would undo a staff decision.
	ErrInviteDisabled = apperr.Invalid("email",
		"Jejak staff disabled this person's access to this tenant, so they cannot be invited again until Jejak staff lift it; contact support.")
	ErrNotFound = tenant.ErrNotFound
)

// InviteRoles are the roles an invitation may give (owners are made from
// members, never invited straight in).
var InviteRoles = []string{tenant.RoleMember, tenant.RoleAdmin}

// Roles are the roles a member may be given.
var Roles = []string{tenant.RoleOwner, tenant.RoleAdmin, tenant.RoleMember}

// Member is one person on the team.
type Member struct {
	UserID      int64
	Name, Email string
	Role        string
	Since       time.Time
	// DisabledByStaff: staff disabled their access; it stays until staff
	// lift it (tenant.ErrStaffDisabled).
	DisabledByStaff bool
}

// Invitation is an invitation not yet accepted or cancelled.
type Invitation struct {
	ID          int64
	Email, Role string
	InvitedBy   string // the inviter's name, "" when unknown
	CreatedAt   time.Time
}

// Service manages a tenant's team.
type Service struct {
	app     database.Pool
	system  database.Pool
	clock   clock.Clock
	audit   *audit.Recorder
	mailer  mail.Mailer
	tenants *tenant.Service
}

// NewService returns a Service over the tenant-facing pool (app) and, for
// what spans tenants (an invited person's invitations), the system pool;
// invitations go out through mailer (the dev sink in development and the
// demo).
func NewService(app, system database.Pool, clk clock.Clock, mailer mail.Mailer, tenants *tenant.Service) *Service {
	if clk == nil {
		clk = clock.Database{}
	}
	return &Service{app: app, system: system, clock: clk, audit: audit.NewRecorder(clk), mailer: mailer, tenants: tenants}
}

// List returns the team (owners first) and the pending invitations.
func (s *Service) List(ctx context.Context, tenantID int64) ([]Member, []Invitation, error) {
	var ms []Member
	var is []Invitation
	err := database.ReadTenantAll(ctx, s.app, tenantID,
		func(db database.Querier) (err error) {
			ms, err = newStore(db).members(ctx, tenantID)
			return err
		},
		func(db database.Querier) (err error) {
			is, err = newStore(db).pending(ctx, tenantID)
			return err
		})
	return ms, is, err
}

// Invite records an invitation for email to join as role and mails it
// (after the commit: no network call holds the transaction open). The mail
// is written in the inviter's language (i18n.Lang(ctx)). A mail that fails
// leaves the invitation in place and returns the error wrapped in
// ErrMailFailed, so the owner can cancel and retry.
func (s *Service) Invite(ctx context.Context, t *tenant.Tenant, actor tenant.Actor, inviterName, email, role string) (*Invitation, error) {
	if actor.Role != tenant.RoleOwner {
		return nil, ErrOwnersOnly
	}
	email = user.NormalizeEmail(email)
	if mail.ValidateAddress(email) != nil || strings.ContainsAny(email, "<> ,;") || len(email) > 254 {
		return nil, ErrBadEmail
	}
	if role != tenant.RoleMember && role != tenant.RoleAdmin {
		return nil, ErrInviteRole
	}
	var inv *Invitation
	err := database.InTenantTx(ctx, s.app, t.ID, func(tx pgx.Tx) error {
		st := newStore(tx)
		if m, found, err := st.memberByEmail(ctx, t.ID, email); err != nil {
			return err
		} else if found && m.DisabledByStaff {
			return ErrInviteDisabled
		} else if found {
			return ErrAlreadyMember
		}
		var err error
		if inv, err = st.invite(ctx, t.ID, email, role, actor.UserID, s.clock.Now()); err != nil {
			return err
		}
		inv.InvitedBy = inviterName
		return s.record(ctx, tx, t.ID, actor, "member.invite", "invitation", inv.ID,
			map[string]any{"email": email, "role": role})
	})
	if err != nil {
		return nil, err
	}
	lang := i18n.Lang(ctx)
	roleName := i18n.In(lang, "role."+role)
	m := mail.Message{
		TenantID: t.ID,
		ID:       fmt.Sprintf("invitation.%d.%d@jejak", t.ID, inv.ID),
		From:     mail.DefaultFrom,
		To:       []string{email},
		Subject:  i18n.In(lang, "mail.invite.subject", inviterName, t.Name),
		Text:     i18n.In(lang, "mail.invite.body", inviterName, t.Name, roleName, email),
	}
	if err := s.mailer.Send(ctx, m); err != nil {
		return inv, fmt.Errorf("%w: %w", ErrMailFailed, err)
	}
	return inv, nil
}

// ErrMailFailed: the invitation was saved but its mail could not be sent.
var ErrMailFailed = errors.New("invitation saved, but its e-mail could not be sent")

// ChangeRole gives a member another role (owners only). The target must
// already be on the team; the tenant keeps at least one owner; the change
// is recorded as membership.set.
func (s *Service) ChangeRole(ctx context.Context, tenantID int64, actor tenant.Actor, userID int64, role string) error {
	if actor.Role != tenant.RoleOwner {
		return ErrOwnersOnly
	}
	m, err := s.tenants.Membership(ctx, tenantID, userID)
	if errors.Is(err, tenant.ErrNotFound) {
		// A staff-disabled membership admits nobody, but it is there:
		// say why it cannot change.
		var disabled bool
		if derr := database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) (err error) {
			disabled, err = newStore(tx).disabled(ctx, tenantID, userID)
			return err
		}); derr != nil {
			return derr
		}
		if disabled {
			return tenant.ErrStaffDisabled
		}
	}
	if err != nil {
		return err
	}
	if m.Role == role {
		// A change that changes nothing is not recorded.
		return ErrSameRole
	}
	return s.tenants.SetMembership(ctx, tenantID, actor, userID, role)
}

// Remove takes a member off the team (owners only; not themselves; never
// the last active owner) and records member.remove with who it was.
func (s *Service) Remove(ctx context.Context, tenantID int64, actor tenant.Actor, userID int64) error {
	if actor.Role != tenant.RoleOwner {
		return ErrOwnersOnly
	}
	if userID == actor.UserID {
		return ErrRemoveSelf
	}
	return database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		// Removing an owner takes one away: the rule and the actor's own
		// ownership are checked under the owner lock.
		if err := tenant.KeepOwner(ctx, tx, tenantID, actor.UserID, userID); err != nil {
			return err
		}
		st := newStore(tx)
		m, err := st.member(ctx, tenantID, userID)
		if err != nil {
			return err
		}
		if m.DisabledByStaff {
			return tenant.ErrStaffDisabled
		}
		if err := st.remove(ctx, tenantID, userID); err != nil {
			return err
		}
		return s.record(ctx, tx, tenantID, actor, "member.remove", "user", userID,
			map[string]any{"name": m.Name, "email": m.Email, "role": m.Role})
	})
}

// Revoke cancels a pending invitation (owners only) and records it.
func (s *Service) Revoke(ctx context.Context, tenantID int64, actor tenant.Actor, invitationID int64) error {
	if actor.Role != tenant.RoleOwner {
		return ErrOwnersOnly
	}
	return database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		email, err := newStore(tx).revoke(ctx, tenantID, invitationID, s.clock.Now())
		if err != nil {
			return err
		}
		return s.record(ctx, tx, tenantID, actor, "invitation.revoke", "invitation", invitationID,
			map[string]any{"email": email})
	})
}

func (s *Service) record(ctx context.Context, tx pgx.Tx, tenantID int64, actor tenant.Actor, action, entity string, entityID int64, detail map[string]any) error {
	b, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encode audit detail: %w", err)
	}
	uid := actor.UserID
	if err := s.audit.Append(ctx, tx, audit.Event{TenantID: tenantID, ActorKind: audit.ActorUser, ActorID: &uid,
		Action: action, Entity: entity, EntityID: strconv.FormatInt(entityID, 10), Detail: b, TraceID: actor.TraceID}); err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}
