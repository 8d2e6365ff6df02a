package webhook_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/webhook"
)

// liveJobs counts the webhook jobs still to run.
func (v *env) liveJobs(t *testing.T) int {
	t.Helper()
	return v.count(t, "SELECT count(*) FROM jobs WHERE kind = $1 AND state IN ('pending', 'running')", webhook.Kind)
}

func (v *env) held(t *testing.T) int {
	t.Helper()
	return v.count(t, "SELECT count(*) FROM webhook_deliveries WHERE held_at IS NOT NULL")
}

// holder is the delivery named as holding the endpoint's breaker (0: none).
func (v *env) holder(t *testing.T, endpointID int64) int64 {
	t.Helper()
	return int64(v.count(t, "SELECT coalesce(breaker_holder, 0) FROM webhook_endpoints WHERE id = $1", endpointID))
}

// handOver checks that, the breaker's holder old having ended, one sweep
// pass releases exactly one held delivery, which becomes the holder once
// its job runs, leaving wantHeld held; it returns the new holder.
func (v *env) handOver(t *testing.T, endpointID, old int64, wantHeld int, why string) int64 {
	t.Helper()
	if n := v.sweep(t); n != 1 {
		t.Fatalf("%s: the sweep released %d deliveries, want 1", why, n)
	}
	v.work(t)
	next := v.holder(t, endpointID)
	if next == old || next == 0 || v.held(t) != wantHeld {
		t.Fatalf("%s: holder %d (was %d), %d held, want %d", why, next, old, v.held(t), wantHeld)
	}
	return next
}

func (v *env) sweep(t *testing.T) int {
	t.Helper()
	n, err := webhook.HeldSweep{System: v.db.System, Jobs: v.engine, Clock: v.clk}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOpenBreakerHoldsTheBacklogWithoutJobs: behind an open breaker one
// delivery's job waits it out and the others are held with no job, so a
// cool-down ending claims one job however large the backlog; the probe
// that closes the breaker sends the held deliveries back to the queue and
// each is delivered once.
func TestOpenBreakerHoldsTheBacklogWithoutJobs(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	v.deliver.Breaker = webhook.Breaker{Failures: 3, Cooldown: 30 * time.Second}
	rcv := newReceiver(t, nil, 500, 500, 500, 500, 500, 200)
	v.hook(t, rcv)
	v.emit(t, 1, 3, nil)
	v.work(t)
	const backlog = 40
	v.emit(t, 4, backlog, nil)
	// Recorded behind the open breaker: held at once, without a job.
	if held, live := v.held(t), v.liveJobs(t); held != backlog || live != 3 {
		t.Fatalf("%d new deliveries held and %d webhook jobs, want all %d held and only the 3 retries' jobs", held, live, backlog)
	}
	v.work(t)
	// The three failed ones come up for their retry: held too.
	v.clk.Advance(6 * time.Second)
	v.work(t)
	if n := len(rcv.all()); n != 3 {
		t.Fatalf("the receiver got %d requests with the breaker open, want 3", n)
	}
	if held, live := v.held(t), v.liveJobs(t); held != backlog+2 || live != 1 {
		t.Fatalf("%d deliveries held and %d webhook jobs left, want %d held and the holder's one job", held, live, backlog+2)
	}
	// Until a probe succeeds, whatever the clock does, a pass claims at
	// most the holder's job (one probe), not every pending delivery, and
	// the sweep leaves the held ones alone.
	for step := 0; len(rcv.all()) < 6; step++ {
		if step > 40 {
			t.Fatalf("no successful probe after %d steps of 30 s (%d requests)", step, len(rcv.all()))
		}
		v.clk.Advance(30 * time.Second)
		sent := len(rcv.all())
		if n := v.work(t); n > 1 || len(rcv.all()) > sent+n {
			t.Fatalf("step %d with the breaker open: %d jobs claimed and %d requests sent, want at most the holder's one", step, n, len(rcv.all())-sent)
		}
		if len(rcv.all()) == 6 {
			break // the probe succeeded and released the held deliveries
		}
		if n := v.sweep(t); n != 0 {
			t.Fatalf("the sweep moved %d held deliveries while the holder waits behind an open breaker", n)
		}
	}
	for i := 0; i < 10 && v.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'succeeded'") < backlog+3; i++ {
		v.work(t)
	}
	if n := v.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'succeeded'"); n != backlog+3 {
		t.Fatalf("%d deliveries succeeded after the breaker closed, want %d", n, backlog+3)
	}
	if held, live := v.held(t), v.liveJobs(t); held != 0 || live != 0 {
		t.Fatalf("after recovery: %d held, %d jobs left", held, live)
	}
	ok := map[string]int{}
	for _, r := range rcv.all() {
		ok[r.id]++
	}
	if len(ok) != backlog+3 {
		t.Fatalf("the receiver saw %d distinct messages, want %d", len(ok), backlog+3)
	}
	if n := v.count(t, "SELECT sum(attempts) FROM webhook_deliveries"); n != len(rcv.all()) {
		t.Fatalf("%d attempts counted for %d requests", n, len(rcv.all()))
	}
}

// TestHeldSweep: the sweep releases held deliveries in bounded batches
// once the breaker is closed, gives an open breaker a new holder when the
// old one ended without closing it or its job died, and fails the held
// deliveries of a disabled endpoint as their jobs would have.
func TestHeldSweep(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	v.deliver.Breaker = webhook.Breaker{Failures: 1, Cooldown: time.Hour}
	rcv := newReceiver(t, nil, 500, 200)
	ctx := context.Background()
	epID := v.hook(t, rcv)
	v.emit(t, 1, 1, nil)
	v.work(t) // fails: the breaker opens for an hour
	v.emit(t, 2, 5, nil)
	v.work(t)
	holder := v.holder(t, epID)
	if held := v.held(t); held != 5 || holder != 1 {
		t.Fatalf("%d held, holder %d: want all 5 later ones held behind the delivery whose failure opened the breaker", held, holder)
	}
	// The holder ends without closing the breaker (its last attempt
	// failed): one held delivery is released to take its place.
	if _, err := v.db.Admin.Exec(ctx, "UPDATE webhook_deliveries SET state = 'failed' WHERE id = $1", holder); err != nil {
		t.Fatal(err)
	}
	next := v.handOver(t, epID, holder, 4, "the holder failed for good")
	if n := v.sweep(t); n != 0 {
		t.Fatalf("the sweep released %d more while the new holder waits", n)
	}
	// The new holder's job dies (its own attempts spent on database
	// errors): its delivery is still pending, but nothing waits the
	// breaker out any more, so the sweep hands it on again.
	if _, err := v.db.Admin.Exec(ctx, `UPDATE jobs SET state = 'dead', finished_at = now()
		WHERE id = (SELECT breaker_holder_job FROM webhook_endpoints WHERE id = $1)`, epID); err != nil {
		t.Fatal(err)
	}
	v.handOver(t, epID, next, 3, "the holder's job died")

	// The owner disables the endpoint: the sweep fails what it held.
	if err := v.svc.SetEnabled(ctx, v.tenant, v.owner, epID, false); err != nil {
		t.Fatal(err)
	}
	if n := v.sweep(t); n != 3 {
		t.Fatalf("the sweep failed %d held deliveries of a disabled endpoint, want 3", n)
	}
	if n := v.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'failed' AND last_error = 'endpoint disabled'"); n != 3 {
		t.Fatalf("%d deliveries failed as 'endpoint disabled', want 3", n)
	}

	// Enabled again with its breaker open once more (the holder still
	// waiting), a burst of 250 events is held; enabling it again closes
	// the breaker, and the sweep releases them at most 200 a pass.
	if err := v.svc.SetEnabled(ctx, v.tenant, v.owner, epID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := v.db.Admin.Exec(ctx, "UPDATE webhook_endpoints SET breaker_open_until = $2 WHERE id = $1",
		epID, v.clk.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// The burst is one user's doing: released later, their jobs still act
	// for that user, in the trace of the request that caused it.
	user := v.owner.UserID
	burst := make([]webhook.Event, 250)
	for i := range burst {
		burst[i] = webhook.Event{TenantID: v.tenant, ID: int64(100 + i), Type: "project.created",
			Body: []byte(`{"id":"evt_` + strconv.Itoa(100+i) + `"}`), TraceID: "t", RequestedBy: &user}
	}
	if _, err := v.fanout.HandleEvents(ctx, burst); err != nil {
		t.Fatal(err)
	}
	for v.work(t) > 0 {
	}
	if held := v.held(t); held != 250 {
		t.Fatalf("%d held behind the breaker, want the 250 new ones", held)
	}
	if err := v.svc.SetEnabled(ctx, v.tenant, v.owner, epID, true); err != nil {
		t.Fatal(err)
	}
	if n := v.sweep(t); n != 200 {
		t.Fatalf("first pass after the breaker closed released %d, want a batch of 200", n)
	}
	if n := v.sweep(t); n != 50 {
		t.Fatalf("second pass released %d, want the other 50", n)
	}
	if held := v.held(t); held != 0 {
		t.Fatalf("%d still held", held)
	}
	if n := v.count(t, "SELECT count(*) FROM jobs WHERE kind = $1 AND state = 'pending' AND requested_by = $2 AND trace_id = 't'",
		webhook.Kind, user); n != 250 {
		t.Fatalf("%d released jobs act for the user who caused the burst, in its trace; want 250", n)
	}
}

// TestDeliveryJobsActForTheEventsUser: every attempt's job of a delivery
// names the user whose action caused the event (the retry inherits it), and
// a resend names the owner who asked for it; the system's own events name
// nobody.
func TestDeliveryJobsActForTheEventsUser(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	rcv := newReceiver(t, nil, 500, 200)
	ctx := context.Background()
	epID := v.hook(t, rcv)
	user := v.owner.UserID
	if _, err := v.fanout.HandleEvents(ctx, []webhook.Event{
		{TenantID: v.tenant, ID: 1, Type: "project.created", Body: []byte(`{"id":"evt_1"}`), TraceID: "t", RequestedBy: &user},
		{TenantID: v.tenant, ID: 2, Type: "webhook.endpoint.disabled", Body: []byte(`{"id":"evt_2"}`), TraceID: "t"},
	}); err != nil {
		t.Fatal(err)
	}
	v.work(t) // the first attempt of event 1 fails and is retried; event 2 goes
	jobs := func(q string) int {
		t.Helper()
		return v.count(t, "SELECT count(*) FROM jobs j JOIN webhook_deliveries d ON d.id = (j.payload->>'delivery_id')::bigint WHERE "+q)
	}
	if n := jobs("d.event_id = 1 AND j.requested_by = " + strconv.FormatInt(user, 10)); n != 2 {
		t.Fatalf("%d of event 1's attempt jobs name its user, want both (the first and the retry)", n)
	}
	if n := jobs("d.event_id = 2 AND j.requested_by IS NULL"); n != 1 {
		t.Fatalf("%d jobs of the system's event name nobody, want 1", n)
	}
	var did int64
	if err := v.db.Admin.QueryRow(ctx, "SELECT id FROM webhook_deliveries WHERE event_id = 2").Scan(&did); err != nil {
		t.Fatal(err)
	}
	if _, err := v.svc.Resend(ctx, v.tenant, v.owner, epID, did); err != nil {
		t.Fatal(err)
	}
	if n := jobs("d.event_id = 2 AND j.requested_by = " + strconv.FormatInt(user, 10)); n != 1 {
		t.Fatalf("%d resend jobs name the owner who resent, want 1", n)
	}
}

// TestHeldSweepFailsADeletedEndpointsHeldDeliveries: deleted while its
// breaker held deliveries, the endpoint's held deliveries fail as
// "endpoint deleted", as their jobs would have.
func TestHeldSweepFailsADeletedEndpointsHeldDeliveries(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	v.deliver.Breaker = webhook.Breaker{Failures: 1, Cooldown: time.Hour}
	epID := v.hook(t, newReceiver(t, nil, 500))
	v.emit(t, 1, 1, nil)
	v.work(t) // fails: the breaker opens for an hour
	v.emit(t, 2, 3, nil)
	if held := v.held(t); held != 3 {
		t.Fatalf("%d held, want 3", held)
	}
	if _, err := v.svc.Delete(context.Background(), v.tenant, v.owner, epID); err != nil {
		t.Fatal(err)
	}
	if n := v.sweep(t); n != 3 {
		t.Fatalf("the sweep failed %d held deliveries of a deleted endpoint, want 3", n)
	}
	if n := v.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'failed' AND last_error = 'endpoint deleted' AND held_at IS NULL"); n != 3 {
		t.Fatalf("%d deliveries failed as 'endpoint deleted', want 3", n)
	}
}

// TestHeldBacklogDrainsAsTheEndpointTakesIt: once the probe has closed the
// breaker and released its batch, each success releases one more held
// delivery, so a backlog larger than a batch is delivered without waiting
// for the sweep's passes.
func TestHeldBacklogDrainsAsTheEndpointTakesIt(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	v.deliver.Breaker = webhook.Breaker{Failures: 1, Cooldown: time.Minute}
	rcv := newReceiver(t, nil, 500, 200)
	v.hook(t, rcv)
	v.emit(t, 1, 1, nil)
	v.work(t)           // fails: the breaker opens
	const backlog = 260 // more than the probe releases
	v.emit(t, 2, backlog, nil)
	if held := v.held(t); held != backlog {
		t.Fatalf("%d held behind the open breaker, want %d", held, backlog)
	}
	v.clk.Advance(2 * time.Minute)
	succeeded := func() int { return v.count(t, "SELECT count(*) FROM webhook_deliveries WHERE state = 'succeeded'") }
	for step := 0; step < 20 && succeeded() < backlog+1; step++ {
		v.work(t)
	}
	if n, held := succeeded(), v.held(t); n != backlog+1 || held != 0 {
		t.Fatalf("without a sweep pass %d of %d delivered and %d still held", n, backlog+1, held)
	}
	if got := len(rcv.all()); got != backlog+2 {
		t.Fatalf("the receiver got %d requests, want %d (the failure, then each delivery once)", got, backlog+2)
	}
}

// TestHeldBacklogDrainsThroughFailures: a receiver that refuses one attempt
// in two (never three in a row, so the breaker stays closed) still gets
// the whole backlog released without the sweep: a failed attempt makes
// room for the next held delivery as a success does, its own retry waiting
// for its time.
func TestHeldBacklogDrainsThroughFailures(t *testing.T) {
	t.Parallel()
	v := newEnv(t, webhook.Guard{Allow: loopback})
	v.deliver.Breaker = webhook.Breaker{Failures: 3, Cooldown: time.Minute}
	// The probe releases 200; with one failure in two, a chain of
	// successes alone would release about 400.
	const backlog = 600
	// The third failure opens the breaker; the probe succeeds.
	codes := []int{500, 500, 500, 200}
	for len(codes) < 2*backlog {
		codes = append(codes, 500, 200)
	}
	rcv := newReceiver(t, nil, codes...)
	v.hook(t, rcv)
	v.emit(t, 1, 3, nil)
	for v.work(t) > 0 { // fails three times: the breaker opens
	}
	v.emit(t, 4, backlog, nil)
	if held := v.held(t); held != backlog {
		t.Fatalf("%d held behind the open breaker, want %d", held, backlog)
	}
	v.clk.Advance(2 * time.Minute) // past the cool-down, not yet the failed ones' next retries
	for step := 0; step < 40 && v.held(t) > 0; step++ {
		v.work(t)
	}
	if held := v.held(t); held != 0 {
		t.Fatalf("without a sweep pass %d deliveries are still held", held)
	}
}
