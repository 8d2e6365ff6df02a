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
	if r.UserID != nil {
		// Without the password hash: enough to show and authorize a
		// request, never to check a password.
		u = &user.User{ID: *r.UserID, Email: ptr.Value(r.UserEmail), Name: ptr.Value(r.UserName),
			StaffRole: ptr.Value(r.UserStaffRole), Locale: ptr.Value(r.UserLocale), TimeZone: ptr.Value(r.UserTimeZone),
			Active: r.UserActive != nil && *r.UserActive}
	}
	return r.Data, r.Expiry, u, true, nil
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
