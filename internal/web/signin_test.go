package web_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/user"
	"github.com/jejakhq/jejak/internal/web"
)

func signInReq(f *fixture, c *client, email, password, xff string) *http.Request {
	form := c.withCSRF(url.Values{"email": {email}, "password": {password}})
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	return req
}

// 300 parallel wrong passwords for one account get at most the allowed
// number of guesses, and never more hashes at once than the gate's cap.
func TestParallelSignInsBoundedGuessesAndHashing(t *testing.T) {
	t.Parallel()
	f, deps, _ := newFixtureWith(t, nil)
	gate := deps.Users.Hashing
	melati := f.tenantID("toko-bunga-melati")
	c := f.client()
	c.csrf() // the cookie and token are shared by all 300 requests
	const n = 300
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		req := signInReq(f, c, "budi@melati.test", "guess", "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := c.http.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			statuses <- res.StatusCode
		}()
	}
	close(start)
	wg.Wait()
	close(statuses)
	byStatus := map[int]int{}
	for s := range statuses {
		byStatus[s]++
	}
	for s := range byStatus {
		if s != http.StatusUnauthorized && s != http.StatusTooManyRequests && s != http.StatusServiceUnavailable {
			t.Fatalf("unexpected status %d (%v)", s, byStatus)
		}
	}
	if byStatus[http.StatusUnauthorized] > 5 || gate.Total() > 5 {
		t.Fatalf("%d guesses answered, %d hashes run; at most 5 allowed (%v)", byStatus[http.StatusUnauthorized], gate.Total(), byStatus)
	}
	if gate.Peak() > int64(gate.Cap()) {
		t.Fatalf("%d hashes ran at once, cap %d", gate.Peak(), gate.Cap())
	}
	f.eventually(byStatus[http.StatusUnauthorized], `SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action = 'auth.signin_failed'`, melati)
	t.Logf("statuses %v, hashes %d, peak %d of %d", byStatus, gate.Total(), gate.Peak(), gate.Cap())
}

// Behind a trusted proxy, the throttle counts the real client: a stranger
// who used up their guesses cannot lock the owner out from elsewhere.
// Without trust, X-Forwarded-For is ignored, so rotating it does not buy
// more guesses.
func TestSignInThrottlePerClientBehindTrustedProxy(t *testing.T) {
	t.Parallel()
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	f, _, _ := newFixtureWith(t, func(d *web.Deps) { d.TrustedProxies = []*net.IPNet{loopback} })
	stranger := f.client()
	for i := 0; i < 5; i++ {
		if a := stranger.do(signInReq(f, stranger, "budi@melati.test", "guess", "203.0.113.9")); a.status != http.StatusUnauthorized {
			t.Fatalf("stranger attempt %d: %d", i+1, a.status)
		}
	}
	if a := stranger.do(signInReq(f, stranger, "budi@melati.test", "jejak-demo", "203.0.113.9")); a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") == "" {
		t.Fatalf("stranger's 6th attempt: %d, want 429 with Retry-After", a.status)
	}
	owner := f.client()
	if a := owner.do(signInReq(f, owner, "budi@melati.test", "jejak-demo", "198.51.100.7")); a.status != http.StatusSeeOther {
		t.Fatalf("owner from another address: %d, want 303 (not locked out)", a.status)
	}

	// No trusted proxies: the header is the client's word, not believed.
	g := newFixture(t)
	c := g.client()
	for i := 0; i < 5; i++ {
		c.do(signInReq(g, c, "sari@senja.test", "guess", "192.0.2."+string(rune('1'+i))))
	}
	if a := c.do(signInReq(g, c, "sari@senja.test", "guess", "192.0.2.99")); a.status != http.StatusTooManyRequests {
		t.Fatalf("rotating X-Forwarded-For without a trusted proxy: %d, want 429", a.status)
	}
}

// When every hashing slot stays busy, sign-in answers 503 with Retry-After
// at once, and the refused attempt does not count against the account.
func TestSignInBusyAnswers503(t *testing.T) {
	t.Parallel()
	f, deps, _ := newFixtureWith(t, func(d *web.Deps) { d.Users.Hashing = user.NewHashGate(1, 10*time.Millisecond) })
	held, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = deps.Users.Hashing.Do(context.Background(), func() { close(held); <-release })
	}()
	<-held
	c := f.client()
	a := c.do(signInReq(f, c, "budi@melati.test", "jejak-demo", ""))
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
		t.Fatalf("saturated: %d Retry-After=%q, want 503 with Retry-After", a.status, a.header.Get("Retry-After"))
	}
	if n := f.count(`SELECT coalesce(sum(attempts), 0) FROM signin_throttle`); n != 0 {
		t.Fatalf("a refused attempt stayed counted: %d", n)
	}
	close(release)
	c.login("budi@melati.test")
}

// A known and an unknown e-mail cost the same: one hash each.
func TestSignInUnknownEmailDoesEqualWork(t *testing.T) {
	t.Parallel()
	f, deps, _ := newFixtureWith(t, nil)
	gate := deps.Users.Hashing
	c := f.client()
	for _, email := range []string{"budi@melati.test", "nobody@melati.test", "rina@melati.test", "ghost@nowhere.test"} {
		before := gate.Total()
		if a := c.do(signInReq(f, c, email, "guess", "")); a.status != http.StatusUnauthorized {
			t.Fatalf("%s: %d", email, a.status)
		}
		if d := gate.Total() - before; d != 1 {
			t.Fatalf("%s cost %d hashes, want 1", email, d)
		}
	}
}
