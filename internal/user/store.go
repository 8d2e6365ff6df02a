package user

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/queries"
)

// Store reads and writes users. The users table is global (not tenant
// owned), so any pool may serve it.
type Store struct {
	q *queries.Queries
}

// NewStore returns a Store over db.
func NewStore(db queries.DBTX) *Store { return &Store{q: queries.New(db)} }

// GetByEmail returns the user with that (normalised) e-mail.
func (s *Store) GetByEmail(ctx context.Context, email string) (*User, error) {
	r, err := s.q.UserGetByEmail(ctx, email)
	if err != nil {
		return nil, mapErr(err, "get user by email")
	}
	return fromRow(r), nil
}

// GetByID returns the user with that id.
func (s *Store) GetByID(ctx context.Context, id int64) (*User, error) {
	r, err := s.q.UserGetByID(ctx, id)
	if err != nil {
		return nil, mapErr(err, "get user by id")
	}
	return fromRow(r), nil
}

// Upsert creates or updates a user by e-mail, keeping an existing password
// hash (used by the demo seeder, which must be idempotent).
func (s *Store) Upsert(ctx context.Context, email, name, passwordHash, staffRole string) (*User, error) {
	var role *string
	if staffRole != "" {
		role = &staffRole
	}
	r, err := s.q.UserUpsert(ctx, queries.UserUpsertParams{Email: NormalizeEmail(email), Name: name, PasswordHash: passwordHash, StaffRole: role})
	if err != nil {
		return nil, fmt.Errorf("upsert user %s: %w", email, err)
	}
	return fromRow(r), nil
}

func fromRow(r queries.User) *User {
	u := &User{ID: r.ID, Email: r.Email, Name: r.Name, Active: r.Active, hash: r.PasswordHash}
	if r.StaffRole != nil {
		u.StaffRole = *r.StaffRole
	}
	if r.Locale != nil {
		u.Locale = *r.Locale
	}
	if r.TimeZone != nil {
		u.TimeZone = *r.TimeZone
	}
	return u
}

func mapErr(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return fmt.Errorf("%s: %w", what, err)
}

// SetLocale saves a user's language (nil = follow the browser); false when
// no such user.
func (s *Store) SetLocale(ctx context.Context, id int64, locale *string) (bool, error) {
	n, err := s.q.UserSetLocale(ctx, queries.UserSetLocaleParams{Locale: locale, ID: id})
	if err != nil {
		return false, fmt.Errorf("set locale of user %d: %w", id, err)
	}
	return n > 0, nil
}

// SetTimeZone saves a user's staff-page zone (nil = UTC); false when no
// such user.
func (s *Store) SetTimeZone(ctx context.Context, id int64, zone *string) (bool, error) {
	n, err := s.q.UserSetTimeZone(ctx, queries.UserSetTimeZoneParams{TimeZone: zone, ID: id})
	if err != nil {
		return false, fmt.Errorf("set time zone of user %d: %w", id, err)
	}
	return n > 0, nil
}
