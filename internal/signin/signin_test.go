package signin_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/signin"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/user"
)

func TestThrottleWindowsAndRefusalsCountNothing(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFrozen(time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC))
	limits := signin.Limits{
		AccountIP: signin.Limit{Max: 2, Window: 15 * time.Minute},
		Account:   signin.Limit{Max: 3, Window: time.Hour},
		IP:        signin.Limit{Max: 100, Window: 15 * time.Minute},
	}
	users := user.NewService(user.NewStore(db.App))
	svc := signin.NewService(signin.Config{DB: db.App, Keys: db.System, Users: users, Clock: clk, Limits: limits})
	try := func(ip, password string) error {
		_, err := svc.SignIn(ctx, signin.Attempt{Email: "budi@melati.test", Password: password, IP: ip})
		return err
	}
	for i := 0; i < 2; i++ {
		if err := try("192.0.2.1", "guess"); !errors.Is(err, user.ErrInvalidCredentials) {
			t.Fatalf("guess %d: %v", i+1, err)
		}
	}
	// Blocked from that address, however often it tries: the refusals do
	// not fill the account's wider counter.
	for i := 0; i < 10; i++ {
		var th *signin.Throttled
		if err := try("192.0.2.1", "guess"); !errors.As(err, &th) || th.RetryAfter <= 0 || th.RetryAfter > 15*time.Minute {
			t.Fatalf("blocked attempt: %v", err)
		}
	}
	// So another address still has the account's third attempt.
	if err := try("192.0.2.2", "jejak-demo"); err != nil {
		t.Fatalf("owner elsewhere: %v", err)
	}
	// A success is not counted: still room for one more failure from a
	// third address, then the account-wide limit holds.
	if err := try("192.0.2.3", "guess"); !errors.Is(err, user.ErrInvalidCredentials) {
		t.Fatalf("third address: %v", err)
	}
	if err := try("192.0.2.4", "jejak-demo"); !errors.Is(err, signin.ErrThrottled) {
		t.Fatalf("account limit: %v", err)
	}
	// The windows pass.
	clk.Advance(time.Hour + time.Second)
	if err := try("192.0.2.1", "jejak-demo"); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

// TestConcurrentSignInsOfOneAccountDoNotDeadlock: several tabs signing in
// to one account from one address at once get in (or, past the hashing
// gate, a busy answer); none fails on a deadlock between one's
// reservation and another's refund (which would also leave its attempts
// counted).
func TestConcurrentSignInsOfOneAccountDoNotDeadlock(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	if err := demo.Seed(ctx, db.System); err != nil {
		t.Fatal(err)
	}
	users := user.NewService(user.NewStore(db.App))
	svc := signin.NewService(signin.Config{DB: db.App, Keys: db.System, Users: users, Clock: clock.Database{},
		Limits: signin.Limits{AccountIP: signin.Limit{Max: 1000, Window: time.Hour}, Account: signin.Limit{Max: 1000, Window: time.Hour},
			IP: signin.Limit{Max: 1000, Window: time.Hour}}})
	const tabs, rounds = 12, 10
	for r := 0; r < rounds; r++ {
		errs := make(chan error, tabs)
		start := make(chan struct{})
		for i := 0; i < tabs; i++ {
			go func() {
				<-start
				_, err := svc.SignIn(ctx, signin.Attempt{Email: "budi@melati.test", Password: "jejak-demo", IP: "192.0.2.7"})
				errs <- err
			}()
		}
		close(start)
		for i := 0; i < tabs; i++ {
			// A busy hashing gate (its bound, under the race detector) is
			// an answer; it gives the reservation back through the same
			// refund.
			if err := <-errs; err != nil && !errors.Is(err, user.ErrBusy) {
				t.Fatalf("round %d: a concurrent sign-in failed: %v", r, err)
			}
		}
	}
}
