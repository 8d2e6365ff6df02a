package web_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jejakhq/jejak/internal/app"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/signin"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/web"
)

// TestKnownDeviceSignsInWhileStrangersFillTheAccount: strangers at ten
// addresses use up the account's counter (5 guesses each), so the right
// password from a new browser is refused; from a browser where the owner
// signed in before (its device cookie), it still gets in. A forged cookie
// or another account's buys nothing, and a device's own budget is bounded
// too.
func TestKnownDeviceSignsInWhileStrangersFillTheAccount(t *testing.T) {
	t.Parallel()
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	f, _, _ := newFixtureWith(t, func(d *web.Deps) { d.TrustedProxies = []*net.IPNet{loopback} })
	const budi, home = "budi@melati.test", "198.51.100.7"
	owner := f.client()
	if a := owner.do(signInReq(f, owner, budi, demo.Password, home)); a.status != http.StatusSeeOther {
		t.Fatalf("owner's first sign-in: %d", a.status)
	}
	owner.post("/logout", owner.withCSRF(nil), false)
	rinas := f.client() // a browser where another account signed in
	if a := rinas.do(signInReq(f, rinas, "rina@melati.test", demo.Password, home)); a.status != http.StatusSeeOther {
		t.Fatalf("rina's sign-in: %d", a.status)
	}
	rinas.post("/logout", rinas.withCSRF(nil), false)

	stranger := f.client()
	for ip := 1; ip <= 10; ip++ {
		for i := 0; i < 5; i++ {
			if a := stranger.do(signInReq(f, stranger, budi, "guess", fmt.Sprintf("203.0.113.%d", ip))); a.status != http.StatusUnauthorized {
				t.Fatalf("stranger %d guess %d: %d", ip, i+1, a.status)
			}
		}
	}
	refused := func(who string, c *client, ip string, cookie *http.Cookie) {
		t.Helper()
		req := signInReq(f, c, budi, demo.Password, ip)
		if cookie != nil {
			req.AddCookie(cookie)
		}
		if a := c.do(req); a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" {
			t.Fatalf("%s: %d, want 429 with Retry-After", who, a.status)
		}
	}
	refused("right password from a new browser", f.client(), "192.0.2.50", nil)
	refused("right password from the owner's address, new browser", f.client(), home, nil)
	forged := &http.Cookie{Name: "jejak_device", Value: strings.Repeat("A", 22) + "." + strings.Repeat("B", 43)}
	refused("a forged device cookie", f.client(), "192.0.2.51", forged)
	refused("another account's device cookie", rinas, "192.0.2.52", nil)

	if a := owner.do(signInReq(f, owner, budi, demo.Password, "192.0.2.60")); a.status != http.StatusSeeOther {
		t.Fatalf("owner from a known browser while the account is under attack: %d, want 303", a.status)
	}
	owner.post("/logout", owner.withCSRF(nil), false)
	// The device's own budget: 5 wrong guesses, then refused like anyone.
	for i := 0; i < 5; i++ {
		if a := owner.do(signInReq(f, owner, budi, "typo", home)); a.status != http.StatusUnauthorized {
			t.Fatalf("owner's typo %d: %d", i+1, a.status)
		}
	}
	refused("a known browser past its own budget", owner, home, nil)
}

// TestSignInFailureSameWorkKnownAndUnknown: a wrong password for a known
// account and any password for an unknown e-mail run the same SQL
// statements, in the same order, before the request ends (every
// statement of both pools the handler uses is traced, and the handler has
// returned when a sample is taken), and one password hash each. The
// known account's failure is still recorded in its tenant, after the
// request.
func TestSignInFailureSameWorkKnownAndUnknown(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	if err := demo.Seed(context.Background(), db.System); err != nil {
		t.Fatal(err)
	}
	log := &testdb.StatementLog{}
	appPool, systemPool := log.Pool(t, db.App), log.Pool(t, db.System)
	engine, err := job.New(job.Config{Pool: systemPool, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	deps := app.NewDeps(appPool, systemPool, engine, clock.Database{}, quietLog())
	// The failure record, written after the request, goes through untraced
	// pools so a late write cannot land in a sample by chance.
	deps.SignIn = signin.NewService(signin.Config{DB: appPool, Keys: systemPool, Users: deps.Users,
		Limits: signin.DefaultLimits, Failures: tenant.NewService(db.App, db.System, clock.Database{}), Logger: quietLog()})
	h := web.New(deps)
	done := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if r.URL.Path == "/login" && r.Method == http.MethodPost {
			done <- struct{}{}
		}
	}))
	t.Cleanup(srv.Close)
	f := &fixture{t: t, db: db, srv: srv, jobs: engine}
	gate := deps.Users.Hashing
	c := f.client()
	sample := func(email string) []string {
		req := signInReq(f, c, email, "guess", "")
		log.Take("")
		hashes := gate.Total()
		if a := c.do(req); a.status != http.StatusUnauthorized {
			t.Fatalf("%s: %d", email, a.status)
		}
		<-done
		if d := gate.Total() - hashes; d != 1 {
			t.Fatalf("%s cost %d hashes, want 1", email, d)
		}
		got := log.Take("")
		for i := range got {
			got[i] = strings.Join(strings.Fields(got[i]), " ")
		}
		return got
	}
	sample("warm@nowhere.test") // loads keys once
	want := sample("ghost@nowhere.test")
	for _, email := range []string{"budi@melati.test", "nobody@melati.test", "rina@melati.test"} {
		got := sample(email)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s ran other statements than an unknown e-mail:\n%s\n--- unknown:\n%s", email,
				strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	f.eventually(1, `SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'auth.signin_failed' AND actor_id = $2`,
		f.tenantID("toko-bunga-melati"), f.userID("budi@melati.test"))
}
