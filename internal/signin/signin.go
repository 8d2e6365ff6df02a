// Package signin guards the sign-in form: a throttle shared by every
// replica (a table, not memory) that reserves each attempt before the
// password is hashed, the device cookie that gives an account's known
// browsers their own budget, and the key that signs the CSRF token of
// visitors who have no session yet.
package signin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/user"
)

// Limit is at most Max attempts per Window.
type Limit struct {
	Max    int
	Window time.Duration
}

// Limits are the sign-in throttles.
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
	// Device bounds attempts that carry a valid device cookie for the
	// account: the only limit they meet, so strangers who fill Account,
	// AccountIP or IP do not lock the owner out of a known browser.
	Device Limit
}

// DefaultLimits: 5 per (account, address) per 15 minutes, 50 per account
// per hour, 50 per address per 15 minutes, 5 per (account, device) per 15
// minutes.
var DefaultLimits = Limits{
	AccountIP: Limit{Max: 5, Window: 15 * time.Minute},
	Account:   Limit{Max: 50, Window: time.Hour},
	IP:        Limit{Max: 50, Window: 15 * time.Minute},
	Device:    Limit{Max: 5, Window: 15 * time.Minute},
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

// FailureRecorder writes a failed sign-in of a known account where its
// owners look (tenant.Service: an event in each of the user's tenants).
type FailureRecorder interface {
	RecordSignIn(ctx context.Context, userID int64, ok bool, ip, traceID string) error
}

// Config is what a Service needs.
type Config struct {
	// DB holds the counters (the tenant-facing pool is enough: the table
	// is not tenant-owned).
	DB database.Pool
	// Keys reads the device-cookie key (the system pool).
	Keys   database.Querier
	Users  *user.Service
	Clock  clock.Clock
	Limits Limits
	// Failures records failed sign-ins of known accounts; nil = not
	// recorded.
	Failures FailureRecorder
	// Logger gets an error in recording a failure, which happens after
	// the answer (nil = slog.Default()).
	Logger *slog.Logger
}

// Service signs users in behind the throttle.
type Service struct {
	cfg       Config
	deviceKey secretKey
	calls     atomic.Uint64
	// recording bounds failure records in flight; recorders waits for
	// them at shutdown.
	recording chan struct{}
	recorders sync.WaitGroup
}

// NewService returns a Service over cfg.
func NewService(cfg Config) *Service {
	if cfg.Clock == nil {
		cfg.Clock = clock.Database{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg, deviceKey: secretKey{db: cfg.Keys, name: "device"}, recording: make(chan struct{}, 16)}
}

// Attempt is one try at signing in.
type Attempt struct {
	Email, Password string
	// IP is the client address (X-Forwarded-For only from trusted
	// proxies).
	IP string
	// Device is the device cookie the browser sent ("" = none).
	Device string
}

// Result is a sign-in's outcome. User is set for a known e-mail even when
// the password was wrong (for the log).
type Result struct {
	User *user.User
	// Device is the device cookie to set after a success: it names this
	// account in this browser.
	Device string
}

type throttleKey struct {
	key string
	lim Limit
	// narrow keys (one account from one address or device) are cleared by
	// a success; the wide ones only get its attempt back.
	narrow bool
}

// keys are the counters an attempt spends: with a valid device cookie
// for the account only that device's, else the account's, the
// (account, address) pair's and the address's.
func (s *Service) keys(email, ip, device string) []throttleKey {
	if device != "" {
		return []throttleKey{{"dev:" + email + "|" + device, s.cfg.Limits.Device, true}}
	}
	keys := []throttleKey{
		{"acct:" + email, s.cfg.Limits.Account, false},
		{"acctip:" + email + "|" + ip, s.cfg.Limits.AccountIP, true},
		{"ip:" + ip, s.cfg.Limits.IP, false},
	}
	// One order for every caller, so two attempts never wait on each
	// other's rows in opposite orders.
	sort.Slice(keys, func(i, j int) bool { return keys[i].key < keys[j].key })
	return keys
}

// SignIn reserves one attempt on every throttle key of the attempt, then
// checks the password. It returns a *Throttled error when a limit is used
// up (nothing is hashed and nothing is counted), user.ErrBusy when no
// hashing slot freed in time (the reservation is given back), and
// user.ErrInvalidCredentials for a wrong guess. A success is not counted,
// forgets the (account, address) or (account, device) failures and comes
// with a new device cookie.
//
// A known and an unknown e-mail do the same work before the answer: the
// same reservation, one lookup, one argon2id comparison (a dummy hash for
// an unknown one) and the same hand-off of the failure record, which is
// written after the caller returns.
func (s *Service) SignIn(ctx context.Context, a Attempt) (Result, error) {
	email := user.NormalizeEmail(a.Email)
	key, err := s.deviceKey.load(ctx)
	if err != nil {
		return Result{}, err
	}
	dev := deviceID(key, email, a.Device)
	keys := s.keys(email, a.IP, dev)
	if err := s.reserve(ctx, keys); err != nil {
		return Result{}, err
	}
	if s.calls.Add(1)%256 == 0 {
		// Windows long past are dead weight; any replica may sweep.
		_ = newStore(s.cfg.DB).prune(ctx, 24*time.Hour, s.cfg.Clock.Now())
	}
	u, err := s.cfg.Users.Authenticate(ctx, email, a.Password)
	if errors.Is(err, user.ErrBusy) {
		if rerr := newStore(s.cfg.DB).refund(context.WithoutCancel(ctx), keyNames(keys, func(throttleKey) bool { return true })); rerr != nil {
			return Result{}, errors.Join(err, rerr)
		}
		return Result{}, err
	}
	if errors.Is(err, user.ErrInvalidCredentials) {
		s.recordFailure(ctx, u, a.IP)
		return Result{User: u}, err
	}
	if err != nil {
		return Result{}, err
	}
	if err := s.forgive(ctx, keys); err != nil {
		return Result{}, err
	}
	return Result{User: u, Device: newDeviceToken(key, email)}, nil
}

// reserve counts one attempt on every key in one transaction, or none
// when any is over its limit.
func (s *Service) reserve(ctx context.Context, keys []throttleKey) error {
	var refused *Throttled
	return database.InTx(ctx, s.cfg.DB, func(tx pgx.Tx) error {
		st := newStore(tx)
		for _, k := range keys {
			r, err := st.reserve(ctx, k.key, k.lim.Window, s.cfg.Clock.Now())
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
}

// forgive undoes a successful attempt's reservation: only failures count.
// It gives back the wide counters and clears the narrow one.
func (s *Service) forgive(ctx context.Context, keys []throttleKey) error {
	st := newStore(s.cfg.DB)
	if wide := keyNames(keys, func(k throttleKey) bool { return !k.narrow }); len(wide) > 0 {
		if err := st.refund(ctx, wide); err != nil {
			return err
		}
	}
	for _, k := range keys {
		if k.narrow {
			if err := st.reset(ctx, k.key); err != nil {
				return err
			}
		}
	}
	return nil
}

// keyNames lists the names of the keys that pick chooses.
func keyNames(keys []throttleKey, pick func(throttleKey) bool) []string {
	var out []string
	for _, k := range keys {
		if pick(k) {
			out = append(out, k.key)
		}
	}
	return out
}

// recordFailure hands a failed attempt to a goroutine that records it
// once the answer is out. Known and unknown e-mails take this same path
// (the unknown one then writes nothing): writing in the request would keep
// the connection busy longer for a known account, which a request
// pipelined behind the attempt measures. At most cap(recording) records
// are in flight; past that the attempt waits for a slot, the same for both.
func (s *Service) recordFailure(ctx context.Context, u *user.User, ip string) {
	select {
	case s.recording <- struct{}{}:
	case <-ctx.Done():
		return
	}
	trace := reqctx.Trace(ctx)
	s.recorders.Add(1)
	go func() {
		defer s.recorders.Done()
		defer func() { <-s.recording }()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if u == nil || s.cfg.Failures == nil {
			return
		}
		if err := s.cfg.Failures.RecordSignIn(rctx, u.ID, false, ip, trace); err != nil {
			s.cfg.Logger.ErrorContext(rctx, "record failed sign-in", "error", err.Error(), "trace_id", trace)
		}
	}()
}

// Drain waits for failure records in flight (at shutdown, before the
// pools close).
func (s *Service) Drain() { s.recorders.Wait() }
