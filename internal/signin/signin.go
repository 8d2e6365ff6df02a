// Package signin guards the sign-in form: a throttle shared by every
// replica (a table, not memory) that reserves each attempt before the
// password is hashed, and the key that signs the CSRF token of visitors who
// have no session yet.
package signin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/user"
)

// Limit is at most Max attempts per Window.
type Limit struct {
	Max    int
	Window time.Duration
}

// Limits are the three sign-in throttles.
type Limits struct {
	// AccountIP bounds guesses at one account from one client address:
	// the tight limit, which a stranger elsewhere cannot use up for the
	// owner.
	AccountIP Limit
	// Account bounds guesses at one account from everywhere together:
	// slower, so only a spread-out attack reaches it.
	Account Limit
	// IP bounds one client address across all accounts (spraying).
	IP Limit
}

// DefaultLimits: 5 per (account, address) per 15 minutes, 50 per account
// per hour, 50 per address per 15 minutes.
var DefaultLimits = Limits{
	AccountIP: Limit{Max: 5, Window: 15 * time.Minute},
	Account:   Limit{Max: 50, Window: time.Hour},
	IP:        Limit{Max: 50, Window: 15 * time.Minute},
}

// ErrThrottled is wrapped by a *Throttled refusal.
var ErrThrottled = errors.New("too many sign-in attempts")

// Throttled is the refusal of an attempt over a limit.
type Throttled struct {
	RetryAfter time.Duration
}

func (t *Throttled) Error() string {
	return fmt.Sprintf("%v; retry after %s", ErrThrottled, t.RetryAfter)
}

// Unwrap makes errors.Is(err, ErrThrottled) hold.
func (t *Throttled) Unwrap() error { return ErrThrottled }

// Service signs users in behind the throttle.
type Service struct {
	db     database.Pool
	users  *user.Service
	clock  clock.Clock
	limits Limits
	calls  atomic.Uint64
}

// NewService returns a Service whose counters live in db (the tenant-facing
// pool is enough: the table is not tenant-owned).
func NewService(db database.Pool, users *user.Service, clk clock.Clock, limits Limits) *Service {
	if clk == nil {
		clk = clock.Database{}
	}
	return &Service{db: db, users: users, clock: clk, limits: limits}
}

// SignIn reserves one attempt on every throttle key of (email, ip), then
// checks the password. It returns a *Throttled error when a limit is used
// up (nothing is hashed and nothing is counted), user.ErrBusy when no
// hashing slot freed in time (the reservation is given back), and
// user.ErrInvalidCredentials (with the user when the e-mail is known) for a
// wrong guess. A success is not counted and forgets the (account, address)
// failures.
func (s *Service) SignIn(ctx context.Context, email, password, ip string) (*user.User, error) {
	email = user.NormalizeEmail(email)
	keys := []struct {
		key string
		lim Limit
	}{
		{"acct:" + email, s.limits.Account},
		{"acctip:" + email + "|" + ip, s.limits.AccountIP},
		{"ip:" + ip, s.limits.IP},
	}
	// One order for every caller, so two attempts never wait on each
	// other's rows in opposite orders.
	sort.Slice(keys, func(i, j int) bool { return keys[i].key < keys[j].key })
	var refused *Throttled
	err := database.InTx(ctx, s.db, func(tx pgx.Tx) error {
		st := newStore(tx)
		for _, k := range keys {
			r, err := st.reserve(ctx, k.key, k.lim.Window, s.clock.Now())
			if err != nil {
				return err
			}
			if int(r.Attempts) > k.lim.Max {
				left := r.WindowStart.Add(k.lim.Window).Sub(r.Now)
				if refused == nil || left > refused.RetryAfter {
					refused = &Throttled{RetryAfter: left}
				}
			}
		}
		if refused != nil {
			// Roll back: a refused attempt counts against nothing, so a
			// stranger who is blocked on one key cannot keep filling
			// the account's wider counter.
			return refused
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.calls.Add(1)%256 == 0 {
		// Windows long past are dead weight; any replica may sweep.
		_ = newStore(s.db).prune(ctx, 24*time.Hour, s.clock.Now())
	}
	u, err := s.users.Authenticate(ctx, email, password)
	if errors.Is(err, user.ErrBusy) {
		all := make([]string, len(keys))
		for i, k := range keys {
			all[i] = k.key
		}
		if rerr := newStore(s.db).refund(context.WithoutCancel(ctx), all); rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		return nil, err
	}
	if err != nil {
		return u, err
	}
	// Only failures count: a success gives back its reservation on the
	// wide counters and clears the (account, address) one.
	st := newStore(s.db)
	if err := st.refund(ctx, []string{"acct:" + email, "ip:" + ip}); err != nil {
		return nil, err
	}
	if err := st.reset(ctx, "acctip:"+email+"|"+ip); err != nil {
		return nil, err
	}
	return u, nil
}
