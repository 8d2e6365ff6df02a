package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/webhook"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

type env struct {
	db      *testdb.DB
	clk     *clock.Frozen
	engine  *job.Engine
	svc     *webhook.Service
	fanout  *webhook.Fanout
	deliver *webhook.Deliverer
	tenant  int64
	owner   webhook.Actor
}

func newEnv(t *testing.T, guard webhook.Guard) *env {
	t.Helper()
	db := testdb.New(t)
	ctx := context.Background()
	var tid, uid int64
	if err := db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ('toko', 'Toko') RETURNING id").Scan(&tid); err != nil {
		t.Fatal(err)
	}
	if err := db.Admin.QueryRow(ctx, "INSERT INTO users (email, name, password_hash) VALUES ('o@toko.test', 'Owner', 'x') RETURNING id").Scan(&uid); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Admin.Exec(ctx, "INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'owner')", tid, uid); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFrozen(time.Now().UTC().Truncate(time.Second))
	e, err := job.New(job.Config{Pool: db.System, Clock: clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	d := &webhook.Deliverer{App: db.App, Jobs: e, Clock: clk, Client: guard.Client(), Logger: quiet}
	e.Register(webhook.Kind, d.Handle, job.KindOptions{MaxAttempts: 3})
	return &env{db: db, clk: clk, engine: e, svc: webhook.NewService(db.App, clk, e),
		fanout: &webhook.Fanout{System: db.System, Jobs: e, Clock: clk, Logger: quiet}, deliver: d,
		tenant: tid, owner: webhook.Actor{UserID: uid, Role: "owner", TraceID: "trace-1"}}
}

// hook makes an endpoint of v's tenant that takes every event, at rcv's
// /hook, and returns its id.
func (v *env) hook(t *testing.T, rcv *receiver) int64 {
	t.Helper()
	c, err := v.svc.Create(context.Background(), v.tenant, v.owner, rcv.URL+"/hook", "*")
	if err != nil {
		t.Fatal(err)
	}
	return c.Endpoint.ID
}

// runDue claims every due webhook job and runs it, as a worker would.
func (v *env) runDue(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	jobs, err := v.engine.Claim(ctx, "w1", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if err := v.deliver.Handle(ctx, j); err != nil {
			t.Fatalf("deliver job %d: %v", j.ID, err)
		}
		if err := v.engine.Complete(ctx, "w1", j.ID); err != nil {
			t.Fatal(err)
		}
	}
	return len(jobs)
}

func (v *env) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := v.db.Admin.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

type received struct {
	id, ts, sig string
	body        []byte
}

// receiver is a real HTTP server answering with the next status in codes
// (the last one repeats) and recording what it got.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	got   []received
	codes []int
	hdr   http.Header
}

func newReceiver(t *testing.T, hdr http.Header, codes ...int) *receiver {
	r := &receiver{codes: codes, hdr: hdr}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp"), req.Header.Get("webhook-signature"), b})
		code := r.codes[min(len(r.got)-1, len(r.codes)-1)]
		r.mu.Unlock()
		for k, v := range r.hdr {
			w.Header()[k] = v
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "answer %d", code)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func TestGuardRefusesInternalAddresses(t *testing.T) {
	t.Parallel()
	g := webhook.Guard{}
	for _, a := range []string{"127.0.0.1", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
		"100.64.0.1", "0.0.0.0", "::", "fe80::1", "fc00::1", "224.0.0.1", "::ffff:127.0.0.1", "198.18.0.1", "64:ff9b::a00:1",
		// IPv6 spellings of IPv4 and other special IPv6 ranges.
		"::127.0.0.1", "::7f00:1", "::a00:1", "::ffff:0:7f00:1", "::ffff:0:a00:1", "2001::7f00:1",
		"2002:7f00:1::1", "100::1", "fec0::1", "2001:db8::1", "2001:2::1"} {
		if g.Allowed(netip.MustParseAddr(a)) {
			t.Errorf("%s allowed", a)
		}
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"} {
		if !g.Allowed(netip.MustParseAddr(a)) {
			t.Errorf("%s refused", a)
		}
	}
	allow, err := webhook.ParseAllowCIDRs("127.0.0.0/8, 10.0.0.5")
	if err != nil || !(webhook.Guard{Allow: allow}).Allowed(netip.MustParseAddr("10.0.0.5")) {
		t.Fatalf("allowlist: %v %v", allow, err)
	}
	if _, err := webhook.ParseAllowCIDRs("10.0.0.0/99"); err == nil {
		t.Fatal("bad CIDR accepted")
	}

	// At dial time: a loopback receiver is refused without the allowlist,
	// also through a host name, and reached with it.
	srv := newReceiver(t, nil, 200)
	_, port, _ := netSplit(srv.URL)
	for _, u := range []string{srv.URL, "http://localhost:" + port + "/"} {
		_, err := g.Client().Post(u, "application/json", nil)
		if !errors.Is(err, webhook.ErrForbiddenAddress) {
			t.Errorf("POST %s without allowlist: %v, want ErrForbiddenAddress", u, err)
		}
	}
	if len(srv.all()) != 0 {
		t.Fatal("the refused requests reached the receiver")
	}
	resp, err := (webhook.Guard{Allow: loopback}).Client().Post(srv.URL, "application/json", nil)
	if err != nil {
		t.Fatalf("allowlisted POST: %v", err)
	}
	resp.Body.Close()
	// IPv4 loopback allowed does not open its IPv4-compatible IPv6 spelling.
	u := "http://[::127.0.0.1]:" + port + "/"
	if _, err := (webhook.Guard{Allow: loopback}).Client().Post(u, "application/json", nil); !errors.Is(err, webhook.ErrForbiddenAddress) {
		t.Errorf("POST %s: %v, want ErrForbiddenAddress", u, err)
	}
	if len(srv.all()) != 1 {
		t.Fatalf("the receiver got %d requests, want only the allowlisted one", len(srv.all()))
	}
}

// TestGuardOpensOneAddressAndPort: an address-and-port opening (the
// demo's receiver) reaches that receiver and no other service on the
// same host.
func TestGuardOpensOneAddressAndPort(t *testing.T) {
	t.Parallel()
	open := newReceiver(t, nil, 200)
	other := newReceiver(t, nil, 200)
	ap := netip.MustParseAddrPort(strings.TrimPrefix(open.URL, "http://"))
	g := webhook.Guard{AllowAddrs: []netip.AddrPort{ap}}
	resp, err := g.Client().Post(open.URL, "application/json", nil)
	if err != nil {
		t.Fatalf("POST to the opened receiver: %v", err)
	}
	resp.Body.Close()
	if _, err := g.Client().Post(other.URL, "application/json", nil); !errors.Is(err, webhook.ErrForbiddenAddress) {
		t.Fatalf("POST to another port of the same host: %v, want ErrForbiddenAddress", err)
	}
	if len(open.all()) != 1 || len(other.all()) != 0 {
		t.Fatalf("requests: opened %d, other %d; want 1 and 0", len(open.all()), len(other.all()))
	}
}

// TestClientCapsResponseHeaders: a receiver that answers with endless
// headers gets an error, not the delivery's memory.
func TestClientCapsResponseHeaders(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", webhook.MaxResponseHeader)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i < 3; i++ {
			w.Header().Add("X-Flood", big)
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	resp, err := (webhook.Guard{Allow: loopback}).Client().Post(srv.URL, "application/json", nil)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("%d KiB of headers accepted", 3*webhook.MaxResponseHeader>>10)
	}
	if !strings.Contains(err.Error(), "header") {
		t.Fatalf("error %v, want one about the response headers", err)
	}
}

func netSplit(u string) (string, string, error) {
	var host, port string
	_, err := fmt.Sscanf(u, "http://%s", &host)
	for i := len(host) - 1; i >= 0; i-- {
		if host[i] == ':' {
			return host[:i], host[i+1:], err
		}
	}
	return host, port, err
}

func TestDeliverySignedAndRedeliveryCreatesNoSecondJob(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	rcv := newReceiver(t, nil, 200)
	created, err := v.svc.Create(ctx, v.tenant, v.owner, rcv.URL+"/hook", "project.created, project.deleted")
	if err != nil {
		t.Fatal(err)
	}
	other, err := v.svc.Create(ctx, v.tenant, v.owner, rcv.URL+"/other", "plan.changed")
	if err != nil {
		t.Fatal(err)
	}
	_ = other
	body := []byte(`{"id":"evt_41","type":"project.created","data":{"name":"Katalog"}}`)
	for range 2 { // the broker delivers the event twice
		if _, err := v.fanout.HandleEvent(ctx, v.tenant, 41, "project.created", body, "tr"); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.count(t, "SELECT count(*) FROM jobs WHERE kind = 'webhook.deliver'"); n != 1 {
		t.Fatalf("%d delivery jobs, want 1 (one matching endpoint, event handled twice)", n)
	}
	if n := v.runDue(t); n != 1 {
		t.Fatalf("ran %d jobs", n)
	}
	got := rcv.all()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests", len(got))
	}
	ts, _ := strconv.ParseInt(got[0].ts, 10, 64)
	if got[0].id != "evt_41" || string(got[0].body) != string(body) ||
		!webhook.Verify(created.Secret, got[0].id, ts, got[0].body, got[0].sig) {
		t.Fatalf("bad delivery: %+v (secret %s)", got[0], created.Secret)
	}
	if webhook.Verify("whsec_"+"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", got[0].id, ts, got[0].body, got[0].sig) {
		t.Fatal("signature verifies under another key")
	}
	_, ds, err := v.svc.EndpointDeliveries(ctx, v.tenant, v.owner, created.Endpoint.ID, 10)
	if err != nil || len(ds) != 1 || ds[0].State != webhook.StateSucceeded || len(ds[0].Log) != 1 ||
		ds[0].Log[0].StatusCode != 200 || ds[0].Log[0].Response != "answer 200" {
		t.Fatalf("deliveries = %+v, %v", ds, err)
	}

	// Rotation: both secrets sign during the overlap.
	newSecret, err := v.svc.Rotate(ctx, v.tenant, v.owner, created.Endpoint.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.svc.Resend(ctx, v.tenant, v.owner, created.Endpoint.ID, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	v.runDue(t)
	got = rcv.all()
	last := got[len(got)-1]
	ts, _ = strconv.ParseInt(last.ts, 10, 64)
	if len(got) != 2 || !webhook.Verify(newSecret, last.id, ts, last.body, last.sig) || !webhook.Verify(created.Secret, last.id, ts, last.body, last.sig) {
		t.Fatalf("resend after rotation: %d requests, signature %q", len(got), last.sig)
	}
	if n := v.count(t, "SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND action LIKE 'webhook.%'", v.tenant); n != 4 {
		t.Fatalf("%d webhook audit events, want 4 (2 creates, rotate, resend)", n)
	}
}

func TestRetryScheduleRetryAfterAnd410(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	busy := newReceiver(t, http.Header{"Retry-After": {"120"}}, 429, 500, 200)
	gone := newReceiver(t, nil, 410)
	b, err := v.svc.Create(ctx, v.tenant, v.owner, busy.URL, "*")
	if err != nil {
		t.Fatal(err)
	}
	g, err := v.svc.Create(ctx, v.tenant, v.owner, gone.URL, "*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.fanout.HandleEvent(ctx, v.tenant, 7, "project.deleted", []byte(`{}`), ""); err != nil {
		t.Fatal(err)
	}
	if n := v.runDue(t); n != 2 {
		t.Fatalf("first round ran %d jobs", n)
	}
	// 410: the endpoint is disabled and the delivery failed, audited.
	eps, _ := v.svc.Endpoints(ctx, v.tenant, v.owner, 0)
	for _, ep := range eps.Rows {
		if ep.ID == g.Endpoint.ID && (ep.Enabled || ep.DisabledReason == "") {
			t.Fatalf("410 endpoint still enabled: %+v", ep)
		}
		if ep.ID == b.Endpoint.ID && !ep.Enabled {
			t.Fatal("429 endpoint disabled")
		}
	}
	if n := v.count(t, "SELECT count(*) FROM audit_events WHERE action = 'webhook.endpoint.disable' AND actor_kind = 'system'"); n != 1 {
		t.Fatalf("%d disable events", n)
	}
	// 429 with Retry-After: 120 s, longer than the schedule's 5 s.
	v.clk.Advance(119 * time.Second)
	if n := v.runDue(t); n != 0 {
		t.Fatalf("retried before Retry-After: %d", n)
	}
	v.clk.Advance(time.Second)
	if n := v.runDue(t); n != 1 {
		t.Fatalf("Retry-After elapsed: ran %d", n)
	}
	// 500: the schedule's third delay, 5 minutes.
	v.clk.Advance(5*time.Minute - time.Second)
	if n := v.runDue(t); n != 0 {
		t.Fatalf("retried before 5 min: %d", n)
	}
	v.clk.Advance(time.Second)
	if n := v.runDue(t); n != 1 {
		t.Fatal("5 min retry did not run")
	}
	_, ds, _ := v.svc.EndpointDeliveries(ctx, v.tenant, v.owner, b.Endpoint.ID, 10)
	if len(ds) != 1 || ds[0].State != webhook.StateSucceeded || ds[0].Attempts != 3 || len(ds[0].Log) != 3 ||
		ds[0].Log[2].StatusCode != 429 || ds[0].Log[1].StatusCode != 500 || ds[0].Log[0].StatusCode != 200 {
		t.Fatalf("busy endpoint deliveries: %+v", ds)
	}
	// Redirects are answers, not followed.
	redir := httptest.NewServer(http.RedirectHandler(busy.URL, http.StatusFound))
	defer redir.Close()
	resp, err := (webhook.Guard{Allow: loopback}).Client().Post(redir.URL, "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("redirect: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestOwnersOnlyAndTenantScoped(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	member := v.owner
	member.Role = "member"
	if _, err := v.svc.Create(ctx, v.tenant, member, "https://example.com/h", "*"); !errors.Is(err, webhook.ErrReadOnly) {
		t.Fatalf("member create: %v", err)
	}
	for _, bad := range [][2]string{{"ftp://x.test/", "*"}, {"https://u:p@x.test/", "*"}, {"https://x.test/", ""}, {"https://x.test/", "Project Created"}} {
		if _, err := v.svc.Create(ctx, v.tenant, v.owner, bad[0], bad[1]); err == nil {
			t.Errorf("create %q %q accepted", bad[0], bad[1])
		}
	}
	c, err := v.svc.Create(ctx, v.tenant, v.owner, "https://example.com/h", "*")
	if err != nil {
		t.Fatal(err)
	}
	var other int64
	if err := v.db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ('kopi', 'Kopi') RETURNING id").Scan(&other); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.svc.EndpointDeliveries(ctx, other, v.owner, c.Endpoint.ID, 10); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("other tenant reads endpoint: %v", err)
	}
	if err := v.svc.SetEnabled(ctx, other, v.owner, c.Endpoint.ID, false); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("other tenant disables endpoint: %v", err)
	}
}
