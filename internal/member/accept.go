package member

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/user"
)

// Invited is a pending invitation addressed to the person reading it.
type Invited struct {
	ID                     int64
	TenantSlug, TenantName string
	Role, InvitedBy        string
	CreatedAt              time.Time
}

// InvitationsFor lists the pending invitations addressed to email, in any
// tenant. Invitations span tenants, so this reads through the system pool;
// it returns only what is addressed to that e-mail.
func (s *Service) InvitationsFor(ctx context.Context, email string) ([]Invited, error) {
	return newStore(s.system).invitedFor(ctx, user.NormalizeEmail(email))
}

// Accept makes userID, signed in as email, a member of the tenant that
// invited that address, with the invited role; marks the invitation
// accepted; and records member.join in that tenant's trail, all in one
// transaction. It returns the tenant's slug. An invitation addressed to
// another e-mail, accepted or cancelled is ErrNotFound. Joining a tenant
// the user already belongs to changes nothing and records nothing.
func (s *Service) Accept(ctx context.Context, userID int64, email string, invitationID int64, traceID string) (string, error) {
	email = user.NormalizeEmail(email)
	var slug string
	err := database.InTx(ctx, s.system, func(tx pgx.Tx) error {
		st := newStore(tx)
		invs, err := st.invitedFor(ctx, email)
		if err != nil {
			return err
		}
		var inv *Invited
		for i := range invs {
			if invs[i].ID == invitationID {
				inv = &invs[i]
			}
		}
		if inv == nil {
			return ErrNotFound
		}
		tenantID, role, err := st.accept(ctx, invitationID, email, s.clock.Now())
		if err != nil {
			return err
		}
		slug = inv.TenantSlug
		added, err := st.add(ctx, tenantID, userID, role)
		if err != nil {
			return err
		}
		if !added {
			// Already on the team, unless staff disabled that membership:
			// accepting must not look like a way back in.
			if disabled, err := st.disabled(ctx, tenantID, userID); err != nil || disabled {
				return cmp.Or(err, error(tenant.ErrStaffDisabled))
			}
			return nil
		}
		uid := userID
		if err := s.audit.Append(ctx, tx, audit.Event{TenantID: tenantID, ActorKind: audit.ActorUser, ActorID: &uid,
			Action: "member.join", Entity: "user", EntityID: strconv.FormatInt(userID, 10),
			Detail: []byte(fmt.Sprintf(`{"role": %q, "invitation": %d}`, role, invitationID)), TraceID: traceID}); err != nil {
			return fmt.Errorf("audit member.join: %w", err)
		}
		return nil
	})
	return slug, err
}
