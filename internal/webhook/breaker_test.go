package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/mail"
	"github.com/jejakhq/jejak/internal/testwait"
	"github.com/jejakhq/jejak/internal/webhook"
	"github.com/jejakhq/jejak/internal/webhook/webhooktest"
)

// work steps the engine once over every due job, as workers would.
func (v *env) work(t *testing.T) int {
	t.Helper()
	n, err := v.engine.WorkOnce(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// emit fans events 1..n (from first) out to the tenant's endpoints.
func (v *env) emit(t *testing.T, first, n int, body func(id int) string) {
	t.Helper()
	for id := first; id < first+n; id++ {
		b := fmt.Sprintf(`{"id":"evt_%d"}`, id)
		if body != nil {
			b = body(id)
		}
		if _, err := v.fanout.HandleEvent(context.Background(), v.tenant, int64(id), "project.created", []byte(b), "t"); err != nil {
			t.Fatal(err)
		}
	}
}

func (v *env) endpoint(t *testing.T, id int64) webhook.Endpoint {
	t.Helper()
	page, err := v.svc.Endpoints(context.Background(), v.tenant, v.owner, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range page.Rows {
		if ep.ID == id {
			return ep
		}
	}
	t.Fatalf("endpoint %d not listed", id)
	return webhook.Endpoint{}
}

// TestBreakerHoldsDeliveriesUntilAProbeSucceeds: after three failures in a
// row the endpoint's breaker opens; deliveries are then held without an
// attempt (their attempts not counted) until the cool-down ends, when one
// probe goes out. A failed probe reopens it for twice as long; a
// successful one closes it and the held deliveries go out.
func TestBreakerHoldsDeliveriesUntilAProbeSucceeds(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	v.deliver.Breaker = webhook.Breaker{Failures: 3, Cooldown: 30 * time.Second}
	rcv := newReceiver(t, nil, 500, 500, 500, 500, 200)
	epID := v.hook(t, rcv)
	v.emit(t, 1, 5, nil)
	v.work(t)
	if n := len(rcv.all()); n != 3 {
		t.Fatalf("the receiver got %d requests, want 3 (then the breaker opens)", n)
	}
	ep := v.endpoint(t, epID)
	if ep.Health.Breaker != webhook.BreakerOpen || ep.ConsecutiveFailures != 3 || ep.Health.Failed != 3 || ep.Health.Succeeded != 0 {
		t.Fatalf("endpoint after 3 failures: %+v", ep)
	}
	if n := v.count(t, "SELECT count(*) FROM webhook_deliveries WHERE attempts = 0"); n != 2 {
		t.Fatalf("%d deliveries without an attempt, want the 2 held ones", n)
	}
	// The failed ones are due again after 5 s: still held.
	v.clk.Advance(6 * time.Second)
	v.work(t)
	if n := len(rcv.all()); n != 3 {
		t.Fatalf("the receiver got %d requests while the breaker was open, want 3", n)
	}
	// Cool-down over: one probe, which fails, and the breaker reopens for 60 s.
	v.clk.Advance(25 * time.Second)
	v.work(t)
	if n := len(rcv.all()); n != 4 {
		t.Fatalf("the receiver got %d requests after the cool-down, want 4 (one probe)", n)
	}
	ep = v.endpoint(t, epID)
	if ep.Health.Breaker != webhook.BreakerOpen || ep.BreakerOpenUntil.Sub(*v.clk.Now()) != 60*time.Second {
		t.Fatalf("after a failed probe the breaker should be open for 60 s: %+v (now %v)", ep, v.clk.Now())
	}
	v.clk.Advance(61 * time.Second)
	for i := 0; i < 5 && v.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'succeeded'") < 5; i++ {
		v.work(t)
		v.clk.Advance(webhook.Timeout)
	}
	if n := v.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'succeeded'"); n != 5 {
		t.Fatalf("%d deliveries succeeded after the probe closed the breaker, want 5", n)
	}
	ep = v.endpoint(t, epID)
	if ep.Health.Breaker != webhook.BreakerClosed || ep.ConsecutiveFailures != 0 || ep.Health.Succeeded != 5 || ep.Health.Failed != 4 {
		t.Fatalf("endpoint after recovery: %+v", ep.Health)
	}
	if pct, ok := ep.Health.SuccessRate(); !ok || pct != 55 {
		t.Fatalf("success rate %d%% (%v), want 55%% (5 of 9)", pct, ok)
	}
	// Holding burned nothing: the held jobs were put back several times
	// (more than the job kind's 3 attempts) and still went, and every
	// delivery attempt counted is a request the receiver got.
	if n := v.count(t, "SELECT sum(attempts) FROM webhook_deliveries"); n != len(rcv.all()) || n != 9 {
		t.Fatalf("%d delivery attempts counted for %d requests, want 9", n, len(rcv.all()))
	}
}

// TestEndpointDisabledAfterDaysOfFailures: an endpoint whose attempts have
// all failed for the configured span is disabled by Jejak, with its reason
// shown, the trail recording it with the system as actor, and a
// webhook.endpoint.disabled event published; the owner can enable it
// again, which starts afresh.
func TestEndpointDisabledAfterDaysOfFailures(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	v.deliver.Breaker = webhook.Breaker{DisableAfter: 48 * time.Hour}
	v.deliver.Mailer = mail.NewSink(v.db.App)
	rcv := newReceiver(t, nil, 500)
	ctx := context.Background()
	epID := v.hook(t, rcv)
	v.emit(t, 1, 1, nil)
	v.work(t)
	if ep := v.endpoint(t, epID); !ep.Enabled || ep.FailingSince == nil {
		t.Fatalf("after one failure: %+v", ep)
	}
	v.clk.Advance(47 * time.Hour)
	v.emit(t, 2, 1, nil)
	v.work(t)
	if ep := v.endpoint(t, epID); !ep.Enabled {
		t.Fatal("disabled before the span ended")
	}
	v.clk.Advance(2 * time.Hour)
	v.emit(t, 3, 1, nil)
	v.work(t)
	ep := v.endpoint(t, epID)
	if ep.Enabled || ep.DisabledReason != webhook.ReasonFailing {
		t.Fatalf("after 49 h of failures: enabled %v, reason %q", ep.Enabled, ep.DisabledReason)
	}
	if n := v.count(t, `SELECT count(*) FROM audit_events WHERE action = 'webhook.endpoint.disable' AND actor_kind = 'system'
		AND detail->>'reason' = $1`, webhook.ReasonFailing); n != 1 {
		t.Fatalf("%d system disable events in the trail, want 1", n)
	}
	if n := v.count(t, `SELECT count(*) FROM outbox_messages WHERE event_type = $1 AND tenant_id = $2`, webhook.EventEndpointDisabled, v.tenant); n != 1 {
		t.Fatalf("%d endpoint.disabled events published, want 1", n)
	}
	var payload string
	if err := v.db.Admin.QueryRow(ctx, `SELECT payload::text FROM outbox_messages WHERE event_type = $1`, webhook.EventEndpointDisabled).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	if err := webhooktest.Conforms(webhook.EventEndpointDisabled, []byte(payload)); err != nil {
		t.Fatalf("published %s: %v", webhook.EventEndpointDisabled, err)
	}
	if n := v.count(t, `SELECT count(*) FROM mail_messages WHERE to_addrs = '{o@toko.test}' AND subject LIKE '%' || $1 || '%'
		AND body LIKE '%disabled automatically%' AND body LIKE '%Jejak menonaktifkan endpoint webhook Anda%'`, rcv.URL); n != 1 {
		t.Fatalf("%d notices mailed to the owner in Indonesian and English, want 1", n)
	}
	if err := v.svc.SetEnabled(ctx, v.tenant, v.owner, ep.ID, true); err != nil {
		t.Fatal(err)
	}
	if ep := v.endpoint(t, epID); !ep.Enabled || ep.ConsecutiveFailures != 0 || ep.FailingSince != nil || ep.Health.Breaker != webhook.BreakerClosed {
		t.Fatalf("re-enabled endpoint did not start afresh: %+v", ep)
	}
}

// TestDeleteEndpoint: deleting frees the endpoint's place under the limit,
// removes it from the list and from fan-out, fails its pending
// deliveries, is audited, and is 404 from another tenant or twice.
func TestDeleteEndpoint(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	rcv := newReceiver(t, nil, 200)
	ctx := context.Background()
	v.svc.LimitEndpoints(1)
	c, err := v.svc.Create(ctx, v.tenant, v.owner, rcv.URL+"/a", "*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.svc.Create(ctx, v.tenant, v.owner, rcv.URL+"/b", "*"); apperr.CodeOf(err) != apperr.CodeInvalid {
		t.Fatalf("second endpoint at the limit: %v", err)
	}
	v.emit(t, 1, 1, nil)
	other := seedTenant(t, v.db, "other")
	if _, err := v.svc.Delete(ctx, other.tenant, other.owner, c.Endpoint.ID); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("delete from another tenant: %v, want ErrNotFound", err)
	}
	member := webhook.Actor{UserID: v.owner.UserID, Role: "member"}
	if _, err := v.svc.Delete(ctx, v.tenant, member, c.Endpoint.ID); !errors.Is(err, webhook.ErrReadOnly) {
		t.Fatalf("delete by a member: %v", err)
	}
	if _, err := v.svc.Delete(ctx, v.tenant, v.owner, c.Endpoint.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := v.svc.Delete(ctx, v.tenant, v.owner, c.Endpoint.ID); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if _, _, err := v.svc.EndpointDeliveries(ctx, v.tenant, v.owner, c.Endpoint.ID, 10); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("deleted endpoint's page: %v, want ErrNotFound", err)
	}
	var did int64
	if err := v.db.Admin.QueryRow(ctx, "SELECT id FROM webhook_deliveries").Scan(&did); err != nil {
		t.Fatal(err)
	}
	if _, err := v.svc.Resend(ctx, v.tenant, v.owner, c.Endpoint.ID, did); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("resend to a deleted endpoint: %v, want ErrNotFound", err)
	}
	v.work(t)
	if len(rcv.all()) != 0 {
		t.Fatal("a deleted endpoint received its pending delivery")
	}
	if n := v.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'failed' AND last_error = 'endpoint deleted'"); n != 1 {
		t.Fatalf("%d pending deliveries failed as deleted, want 1", n)
	}
	page, err := v.svc.Endpoints(ctx, v.tenant, v.owner, 0)
	if err != nil || len(page.Rows) != 0 {
		t.Fatalf("list after delete: %d rows, %v", len(page.Rows), err)
	}
	if _, err := v.svc.Create(ctx, v.tenant, v.owner, rcv.URL+"/b", "*"); err != nil {
		t.Fatalf("creating after a delete at the limit: %v", err)
	}
	v.emit(t, 2, 1, nil)
	v.work(t)
	if got := rcv.all(); len(got) != 1 || got[0].id != "evt_2" {
		t.Fatalf("after the delete only the new endpoint receives: %d requests", len(got))
	}
	if n := v.count(t, "SELECT count(*) FROM audit_events WHERE action = 'webhook.endpoint.delete' AND entity_id = $1", fmt.Sprint(c.Endpoint.ID)); n != 1 {
		t.Fatalf("%d delete events in the trail, want 1", n)
	}
}

// TestRecoverResendsFailedDeliveriesSince: recover sends again the
// endpoint's failed deliveries made since the given time, not older ones,
// once however often it is asked; it is audited and tenant-scoped.
func TestRecoverResendsFailedDeliveriesSince(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	rcv := newReceiver(t, nil, 200)
	ctx := context.Background()
	epID := v.hook(t, rcv)
	v.emit(t, 1, 1, nil)
	v.clk.Advance(time.Hour)
	since := *v.clk.Now()
	v.emit(t, 2, 2, nil)
	// Disabled with deliveries pending: all three fail without an attempt.
	if err := v.svc.SetEnabled(ctx, v.tenant, v.owner, epID, false); err != nil {
		t.Fatal(err)
	}
	v.work(t)
	if n := v.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'failed'"); n != 3 {
		t.Fatalf("%d failed deliveries, want 3", n)
	}
	if _, err := v.svc.Recover(ctx, v.tenant, v.owner, epID, since); apperr.CodeOf(err) != apperr.CodeInvalid {
		t.Fatalf("recover of a disabled endpoint: %v, want a validation error", err)
	}
	if err := v.svc.SetEnabled(ctx, v.tenant, v.owner, epID, true); err != nil {
		t.Fatal(err)
	}
	other := seedTenant(t, v.db, "other")
	if _, err := v.svc.Recover(ctx, other.tenant, other.owner, epID, since); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("recover from another tenant: %v", err)
	}
	if _, err := v.svc.Recover(ctx, v.tenant, v.owner, epID, since.Add(time.Hour)); apperr.CodeOf(err) != apperr.CodeInvalid {
		t.Fatalf("recover since the future: %v", err)
	}
	for i, want := range []int{2, 0} {
		n, err := v.svc.Recover(ctx, v.tenant, v.owner, epID, since)
		if err != nil || n != want {
			t.Fatalf("recover #%d: %d, %v; want %d", i+1, n, err, want)
		}
	}
	v.work(t)
	got := rcv.all()
	if len(got) != 2 || got[0].id == "evt_1" || got[1].id == "evt_1" || got[0].id == got[1].id {
		t.Fatalf("the receiver got %d requests (%v), want evt_2 and evt_3 once each", len(got), got)
	}
	if n := v.count(t, "SELECT count(*) FROM audit_events WHERE action = 'webhook.endpoint.recover'"); n != 2 {
		t.Fatalf("%d recover events in the trail, want 2", n)
	}
}

// TestRateLimitPerEndpoint: an endpoint limited to 2 messages a second
// gets 2 in each second, the rest held without burning attempts; a limit
// out of range is refused and changes nothing.
func TestRateLimitPerEndpoint(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	rcv := newReceiver(t, nil, 200)
	ctx := context.Background()
	epID := v.hook(t, rcv)
	if err := v.svc.Configure(ctx, v.tenant, v.owner, epID, webhook.Settings{RateLimit: webhook.MaxRateLimit + 1}); apperr.CodeOf(err) != apperr.CodeInvalid {
		t.Fatalf("rate over the maximum: %v", err)
	}
	if err := v.svc.Configure(ctx, v.tenant, v.owner, epID, webhook.Settings{RateLimit: 2}); err != nil {
		t.Fatal(err)
	}
	if ep := v.endpoint(t, epID); ep.RateLimit != 2 {
		t.Fatalf("rate limit %d, want 2", ep.RateLimit)
	}
	v.emit(t, 1, 5, nil)
	for second, want := range []int{2, 4, 5} {
		v.work(t)
		if n := len(rcv.all()); n != want {
			t.Fatalf("second %d: the receiver got %d, want %d", second, n, want)
		}
		v.clk.Advance(webhook.RateWait)
	}
	if n := v.count(t, "SELECT count(*) FROM webhook_attempts"); n != 5 {
		t.Fatalf("%d attempts, want 5 (held deliveries burn none)", n)
	}
}

// TestOrderedEndpointKeepsAnAggregatesOrder: an ordered endpoint gets a
// project's second event only after its first succeeded (even through a
// retry), while another project's event is not held.
func TestOrderedEndpointKeepsAnAggregatesOrder(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	rcv := newReceiver(t, nil, 500, 200)
	ctx := context.Background()
	epID := v.hook(t, rcv)
	if err := v.svc.Configure(ctx, v.tenant, v.owner, epID, webhook.Settings{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	project := map[int]string{1: "1", 2: "1", 3: "2"}
	v.emit(t, 1, 3, func(id int) string {
		return fmt.Sprintf(`{"id":"evt_%d","aggregate":{"type":"project","id":%q}}`, id, project[id])
	})
	v.work(t) // evt_1 fails, evt_2 waits for it, evt_3 goes
	ids := func() (out []string) {
		for _, r := range rcv.all() {
			out = append(out, r.id)
		}
		return out
	}
	if got := fmt.Sprint(ids()); got != "[evt_1 evt_3]" {
		t.Fatalf("first round: %s, want [evt_1 evt_3]", got)
	}
	for i := 0; i < 4 && len(rcv.all()) < 4; i++ {
		v.clk.Advance(5 * time.Second)
		v.work(t)
	}
	if got := fmt.Sprint(ids()); got != "[evt_1 evt_3 evt_1 evt_2]" {
		t.Fatalf("requests %s, want evt_2 only after evt_1's retry succeeded", got)
	}
}

// TestEventsComeFromTheCatalog: an endpoint subscribes to "*" or to types
// of the catalog; a well-formed type Jejak never sends is refused on the
// events field, and nothing is created.
func TestEventsComeFromTheCatalog(t *testing.T) {
	t.Parallel()
	for _, e := range webhook.Catalog {
		if got, err := webhook.ParseEvents(e.Type); err != nil || len(got) != 1 {
			t.Errorf("catalog type %s refused: %v", e.Type, err)
		}
		if !json.Valid([]byte(e.Example)) {
			t.Errorf("%s: example is not JSON", e.Type)
		}
	}
	v := newEnv(t, webhook.Guard{Allow: loopback})
	_, err := v.svc.Create(context.Background(), v.tenant, v.owner, "https://hooks.example/x", "project.created, invoice.paid")
	if apperr.CodeOf(err) != apperr.CodeInvalid || !strings.Contains(apperr.FieldsOf(err)["events"], "invoice.paid") {
		t.Fatalf("unknown event type: %v", err)
	}
	if n := v.count(t, "SELECT count(*) FROM webhook_endpoints"); n != 0 {
		t.Fatalf("%d endpoints created", n)
	}
}

// TestHealthyEndpointsSuccessesLeaveItsRowAlone: a success at an endpoint
// that has not failed changes nothing on the endpoint's row, so it does
// not lock it and an endpoint's attempts settle side by side. Here the row
// is locked as a concurrent settle's update would lock it, and the
// delivery still settles; a failure then does wait for the lock, since it
// moves the breaker.
func TestHealthyEndpointsSuccessesLeaveItsRowAlone(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	ctx := context.Background()
	rcv := newReceiver(t, nil, 200, 500)
	ep := v.hook(t, rcv)
	v.emit(t, 1, 2, nil)
	lock, err := v.db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, "SELECT 1 FROM webhook_endpoints WHERE id = $1 FOR NO KEY UPDATE", ep); err != nil {
		t.Fatal(err)
	}
	jobs, err := v.engine.Claim(ctx, "w1", 100)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claimed %d jobs (%v), want the two deliveries", len(jobs), err)
	}
	handle := func(i int) chan error {
		done := make(chan error, 1)
		go func() { done <- v.deliver.Handle(ctx, jobs[i]) }()
		return done
	}
	select {
	case err := <-handle(0):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a success at a healthy endpoint waited for the endpoint's row lock")
	}
	if n := v.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'succeeded'"); n != 1 {
		t.Fatalf("%d deliveries succeeded, want 1", n)
	}
	failed := handle(1) // the receiver answers 500 from now on
	testwait.For(t, "the failure's settle waiting for the endpoint's row", func() bool {
		return v.count(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND query LIKE '%WebhookAttemptRecord%'`) == 1
	})
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-failed; err != nil {
		t.Fatal(err)
	}
	if got := v.endpoint(t, ep); got.ConsecutiveFailures != 1 {
		t.Fatalf("after the failure the endpoint has %d failures in a row, want 1", got.ConsecutiveFailures)
	}
}
