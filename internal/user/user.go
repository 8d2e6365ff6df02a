// Package user holds accounts: their password hashes (argon2id), staff roles
// and sign-in.
package user

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/alexedwards/argon2id"

	"github.com/jejakhq/jejak/internal/apperr"
)

// Staff roles. Staff roles are global, not per tenant.
const (
	StaffSupport = "support"
	StaffAdmin   = "admin"
)

var (
	// ErrNotFound means no such user.
	ErrNotFound = apperr.NotFound("user not found")
	// ErrInvalidCredentials covers unknown e-mail, wrong password and
	// disabled account alike, so sign-in does not reveal which one it was.
	ErrInvalidCredentials = apperr.Invalid("email", "Invalid e-mail or password.")
)

// User is an account.
type User struct {
	ID        int64
	Email     string
	Name      string
	StaffRole string // "", "support" or "admin"
	Active    bool
	hash      string
}

// IsStaff reports whether the user is support or admin staff.
func (u *User) IsStaff() bool { return u.StaffRole == StaffSupport || u.StaffRole == StaffAdmin }

// HashPassword hashes a password with argon2id (RFC 9106's second
// recommended parameters scaled down for an interactive login).
func HashPassword(password string) (string, error) {
	h, err := argon2id.CreateHash(password, argon2id.DefaultParams)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return h, nil
}

// NormalizeEmail trims and lower-cases an e-mail address.
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// Service signs users in.
type Service struct {
	store *Store
}

// NewService returns a Service over store.
func NewService(store *Store) *Service { return &Service{store: store} }

var (
	dummyOnce sync.Once
	dummyHash string
)

// Authenticate checks an e-mail and password. An unknown e-mail still costs
// one hash comparison so response time does not reveal whether it exists.
func (s *Service) Authenticate(ctx context.Context, email, password string) (*User, error) {
	u, err := s.store.GetByEmail(ctx, NormalizeEmail(email))
	if errors.Is(err, ErrNotFound) {
		dummyOnce.Do(func() { dummyHash, _ = HashPassword("jejak-dummy-password") })
		_, _ = argon2id.ComparePasswordAndHash(password, dummyHash)
		return nil, ErrInvalidCredentials
	}
	if err != nil {
		return nil, err
	}
	ok, err := argon2id.ComparePasswordAndHash(password, u.hash)
	if err != nil {
		return nil, fmt.Errorf("compare password: %w", err)
	}
	if !ok || !u.Active {
		return u, ErrInvalidCredentials
	}
	return u, nil
}

// Get returns a user by id.
func (s *Service) Get(ctx context.Context, id int64) (*User, error) { return s.store.GetByID(ctx, id) }
