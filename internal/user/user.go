// Package user holds accounts: their password hashes (argon2id), staff roles
// and sign-in.
package user

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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
	// Locale is the language the user chose for the dashboard ("id", "en");
	// "" = follow the browser.
	Locale string
	// TimeZone is the IANA zone staff pages are shown in ("" = UTC).
	TimeZone string
	hash     string
}

// IsStaff reports whether the user is support or admin staff.
func (u *User) IsStaff() bool { return u.StaffRole == StaffSupport || u.StaffRole == StaffAdmin }

// hashParams are argon2id's costs: RFC 9106's second recommended
// parameters scaled down for an interactive login (64 MiB, one pass). A
// test binary hashes with the smallest memory instead: the same algorithm,
// encoding and comparison, but each demo user seeded or signed in costs
// about a millisecond of CPU instead of a hundred, which the suite's
// hundreds of seeded fixtures spent mostly in argon2. Only a test binary
// reports testing.Testing(); the served binary always hashes at full cost.
var hashParams = func() *argon2id.Params {
	if testing.Testing() {
		return &argon2id.Params{Memory: 1024, Iterations: 1, Parallelism: 1, SaltLength: 16, KeyLength: 32}
	}
	return argon2id.DefaultParams
}()

// HashPassword hashes a password with argon2id at hashParams.
func HashPassword(password string) (string, error) {
	h, err := argon2id.CreateHash(password, hashParams)
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
	// Hashing bounds concurrent password comparisons.
	Hashing *HashGate
}

// NewService returns a Service over store with a hashing gate of
// runtime.NumCPU() slots and a one-second wait for a slot.
func NewService(store *Store) *Service {
	return &Service{store: store, Hashing: NewHashGate(0, time.Second)}
}

var (
	dummyOnce sync.Once
	dummyHash string
)

// Authenticate checks an e-mail and password. An unknown e-mail costs the
// same work (one comparison against a dummy hash with the same parameters)
// so response time does not reveal whether it exists. The comparison runs
// under the hashing gate: ErrBusy when it stays saturated.
func (s *Service) Authenticate(ctx context.Context, email, password string) (*User, error) {
	u, err := s.store.GetByEmail(ctx, NormalizeEmail(email))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	var ok bool
	var cmpErr error
	gateErr := s.Hashing.Do(ctx, func() {
		dummyOnce.Do(func() { dummyHash, _ = HashPassword("jejak-dummy-password") })
		if u == nil {
			_, _ = argon2id.ComparePasswordAndHash(password, dummyHash)
			return
		}
		ok, cmpErr = argon2id.ComparePasswordAndHash(password, u.hash)
	})
	if gateErr != nil {
		return nil, gateErr
	}
	if u == nil {
		return nil, ErrInvalidCredentials
	}
	if cmpErr != nil {
		return nil, fmt.Errorf("compare password: %w", cmpErr)
	}
	if !ok || !u.Active {
		return u, ErrInvalidCredentials
	}
	return u, nil
}

// Get returns a user by id.
func (s *Service) Get(ctx context.Context, id int64) (*User, error) { return s.store.GetByID(ctx, id) }
