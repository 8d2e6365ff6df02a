package signin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jejakhq/jejak/internal/ptr"
	"github.com/jejakhq/jejak/internal/queries"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/user"
)

type store struct{ q *queries.Queries }

func newStore(db queries.DBTX) *store { return &store{q: queries.New(db)} }

func interval(d time.Duration) pgtype.Interval {
	return pgtype.Interval{Microseconds: d.Microseconds(), Valid: true}
}

func (s *store) reserve(ctx context.Context, key string, window time.Duration, now *time.Time) (queries.SignInThrottleReserveRow, error) {
	r, err := s.q.SignInThrottleReserve(ctx, queries.SignInThrottleReserveParams{Key: key, Now: now, Window: interval(window)})
	if err != nil {
		return r, fmt.Errorf("reserve sign-in attempt: %w", err)
	}
	return r, nil
}

func (s *store) refund(ctx context.Context, keys []string) error {
	if err := s.q.SignInThrottleRefund(ctx, keys); err != nil {
		return fmt.Errorf("refund sign-in attempt: %w", err)
	}
	return nil
}

func (s *store) reset(ctx context.Context, key string) error {
	if err := s.q.SignInThrottleReset(ctx, key); err != nil {
		return fmt.Errorf("reset sign-in throttle: %w", err)
	}
	return nil
}

func (s *store) prune(ctx context.Context, olderThan time.Duration, now *time.Time) error {
	if err := s.q.SignInThrottlePrune(ctx, queries.SignInThrottlePruneParams{Now: now, OlderThan: interval(olderThan)}); err != nil {
		return fmt.Errorf("prune sign-in throttle: %w", err)
	}
	return nil
}

func (s *store) secret(ctx context.Context, name string) ([]byte, error) {
	b, err := s.q.WebSecretGet(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read web secret %q: %w", name, err)
	}
	return b, nil
}

// sessionFind reads a live session and the user it was signed in as (nil
// when the token is not indexed by a user).
func (s *store) sessionFind(ctx context.Context, token string) (data []byte, expiry time.Time, u *user.User, ok bool, err error) {
	r, err := s.q.SessionFind(ctx, token)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, time.Time{}, nil, false, nil
	}
	if err != nil {
		return nil, time.Time{}, nil, false, fmt.Errorf("find session: %w", err)
	}
	u = sessionUser(r.UserID, r.UserEmail, r.UserName, r.UserStaffRole, r.UserLocale, r.UserTimeZone, r.UserActive)
	return r.Data, r.Expiry, u, true, nil
}

// sessionUser is the user a session lookup joined (nil for none), without
// the password hash: enough to show and authorize a request, never to
// check a password.
func sessionUser(id *int64, email, name, staffRole, locale, zone *string, active *bool) *user.User {
	if id == nil {
		return nil
	}
	return &user.User{ID: *id, Email: ptr.Value(email), Name: ptr.Value(name), StaffRole: ptr.Value(staffRole),
		Locale: ptr.Value(locale), TimeZone: ptr.Value(zone), Active: active != nil && *active}
}

// sessionFindWithMember is sessionFind with the gate of the tenant named
// slug for the session's user (nil without a user).
func (s *store) sessionFindWithMember(ctx context.Context, token, slug string) (data []byte, expiry time.Time, u *user.User, gate *sessionGate, ok bool, err error) {
	r, err := s.q.SessionFindWithMember(ctx, queries.SessionFindWithMemberParams{Token: token, Slug: slug})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, time.Time{}, nil, nil, false, nil
	}
	if err != nil {
		return nil, time.Time{}, nil, nil, false, fmt.Errorf("find session: %w", err)
	}
	u = sessionUser(r.UserID, r.UserEmail, r.UserName, r.UserStaffRole, r.UserLocale, r.UserTimeZone, r.UserActive)
	if u == nil {
		return r.Data, r.Expiry, nil, nil, true, nil
	}
	gate = &sessionGate{g: tenant.Gate{UserID: u.ID, Role: ptr.Value(r.MemberRole), Disabled: r.MemberDisabled,
		MembersSeeBilling: ptr.Value(r.MembersSeeBilling)}}
	if r.TenantID != nil {
		gate.tenant = &tenant.Tenant{ID: *r.TenantID, Slug: ptr.Value(r.TenantSlug), Name: ptr.Value(r.TenantName),
			TimeZone: ptr.Value(r.TenantTimeZone)}
	}
	return r.Data, r.Expiry, u, gate, true, nil
}

func (s *store) sessionCommit(ctx context.Context, token string, b []byte, expiry time.Time) error {
	if err := s.q.SessionCommit(ctx, queries.SessionCommitParams{Token: token, Data: b, Expiry: expiry}); err != nil {
		return fmt.Errorf("commit session: %w", err)
	}
	return nil
}

func (s *store) sessionDelete(ctx context.Context, token string) error {
	if err := s.q.SessionDelete(ctx, token); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}
