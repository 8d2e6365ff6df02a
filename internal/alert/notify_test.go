package alert_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/jejakhq/jejak/internal/alert"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/natsbus"
	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/webhook"
)

// staffPost is one POST the staff receiver accepted, its signature
// verified.
type staffPost struct {
	id   string
	body struct {
		Type   string        `json:"type"`
		Tenant string        `json:"tenant"`
		Data   alert.Payload `json:"data"`
	}
}

// staffReceiver is a real HTTP server that does what a staff receiver
// should: it verifies the Standard Webhooks signature with the secret and
// refuses timestamps more than 5 minutes from its clock (the test's frozen
// clock, which also stamps the deliveries).
type staffReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	posts    []staffPost
	rejected []string
}

// officialVerify checks a Standard Webhooks signature with the standard's
// own Go library (the timestamp is checked above, against the test clock).
func officialVerify(secret string, h http.Header, body []byte) bool {
	wh, err := standardwebhooks.NewWebhook(secret)
	return err == nil && wh.VerifyIgnoringTimestamp(body, h) == nil
}

func newStaffReceiver(t *testing.T, secret string, clk *clock.Frozen) *staffReceiver {
	r := &staffReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		id := req.Header.Get("webhook-id")
		ts, err := strconv.ParseInt(req.Header.Get("webhook-timestamp"), 10, 64)
		r.mu.Lock()
		defer r.mu.Unlock()
		age := clk.Now().Sub(time.Unix(ts, 0))
		switch {
		case req.Method != http.MethodPost || err != nil || age > 5*time.Minute || age < -5*time.Minute:
			r.rejected = append(r.rejected, "bad method or timestamp")
			w.WriteHeader(http.StatusBadRequest)
			return
		case !officialVerify(secret, req.Header, b):
			r.rejected = append(r.rejected, "bad signature")
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		p := staffPost{id: id}
		if err := json.Unmarshal(b, &p.body); err != nil {
			r.rejected = append(r.rejected, "bad body: "+err.Error())
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.posts = append(r.posts, p)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *staffReceiver) got() ([]staffPost, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]staffPost(nil), r.posts...), append([]string(nil), r.rejected...)
}

// TestAlertTransitionsReachTheStaffWebhook drives dead_letters_growing
// through pending → firing → resolved with real dead letters on a frozen
// clock, with the staff webhook configured as the served app does it, and
// carries every transition the whole real way: outbox → relay → embedded
// nats-server (JetStream) → webhook fan-out consumer → webhook.deliver job
// → a real HTTP receiver checking the signature. Each transition arrives
// exactly once, signed, with its rule and states; an evaluation that fails
// after writing its notification rolls it back and nothing is sent; the
// alerts overview shows every notification delivered.
func TestAlertTransitionsReachTheStaffWebhook(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Second)
	clk := clock.NewFrozen(start)
	engine, err := job.New(job.Config{Pool: db.System, Clock: clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	rcv := newStaffReceiver(t, secret, clk)
	ep, err := webhook.SyncSystemEndpoint(ctx, db.System, clk, webhook.SystemConfig{URL: rcv.URL + "/jejak-alerts",
		Secret: secret, Events: []string{alert.EventType}})
	if err != nil || !ep.Configured || ep.TenantID == 0 {
		t.Fatalf("sync staff endpoint: %+v %v", ep, err)
	}
	guard := webhook.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	deliver := &webhook.Deliverer{App: db.App, Jobs: engine, Clock: clk, Client: guard.Client(), Logger: quiet}
	engine.Register(webhook.Kind, deliver.Handle, job.KindOptions{MaxAttempts: 3})

	bus, err := natsbus.Open(ctx, natsbus.Config{DataDir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	relay, err := outbox.NewRelay(outbox.RelayConfig{Pool: db.System, Sink: natsbus.Sink{JS: bus.JS}, Clock: clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	fan := &webhook.Fanout{System: db.System, Jobs: engine, Clock: clk, Logger: quiet}
	fctx, stopFan := context.WithCancel(ctx)
	fanDone := make(chan error, 1)
	go func() { fanDone <- fan.Run(fctx, bus.Stream) }()
	t.Cleanup(func() { stopFan(); <-fanDone })

	notifier := alert.NewNotifier(ep.TenantID, clk)
	failAfterNotify := false
	ev := alert.New(alert.Config{Pool: db.System, Clock: clk, Logger: quiet,
		Rules: only(alert.DefaultRules(alert.Sources{}), alert.RuleDeadLetters),
		OnTransition: func(ctx context.Context, tx pgx.Tx, tr alert.Transition) error {
			if err := notifier.Hook()(ctx, tx, tr); err != nil {
				return err
			}
			if failAfterNotify {
				return errors.New("the evaluation fails after writing its notification")
			}
			return nil
		}})

	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := db.Admin.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// send moves what the outbox holds to the receiver: the relay publishes,
	// the consumer fans out (polled with a deadline), a worker runs the
	// delivery jobs. It returns how many messages the relay published.
	delivered := 0
	send := func() int {
		t.Helper()
		n, err := relay.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		delivered += n
		deadline := time.Now().Add(20 * time.Second)
		for count(`SELECT count(*) FROM webhook_deliveries WHERE tenant_id = $1`, ep.TenantID) < delivered {
			if time.Now().After(deadline) {
				t.Fatal("the fan-out did not create the delivery")
			}
			time.Sleep(10 * time.Millisecond) // polling for an outcome, with a deadline
		}
		jobs, err := engine.Claim(ctx, "w1", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if err := deliver.Handle(ctx, j); err != nil {
				t.Fatalf("deliver: %v", err)
			}
			if err := engine.Complete(ctx, "w1", j.ID); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	expect := func(want ...string) []staffPost {
		t.Helper()
		posts, rejected := rcv.got()
		if len(rejected) > 0 {
			t.Fatalf("receiver rejected: %v", rejected)
		}
		var got []string
		for _, p := range posts {
			got = append(got, p.body.Data.Rule+":"+p.body.Data.From+">"+p.body.Data.State)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("receiver got %v, want %v", got, want)
		}
		return posts
	}

	// Three real dead letters cross the threshold (> 2).
	tid := tenant(t, db, "alerting")
	ps := make([]job.EnqueueParams, 3)
	for i := range ps {
		ps[i] = job.EnqueueParams{TenantID: tid, Kind: "test.broken", Payload: json.RawMessage(`{}`)}
	}
	if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error { _, err := engine.EnqueueMany(ctx, tx, ps); return err }); err != nil {
		t.Fatal(err)
	}
	jobs, err := engine.Claim(ctx, "w1", 10)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("claim: %d %v", len(jobs), err)
	}
	for _, j := range jobs {
		if st, err := engine.Fail(ctx, "w1", j.ID, job.Permanent(errors.New("bad"))); err != nil || st != job.StateDead {
			t.Fatalf("fail: %s %v", st, err)
		}
	}

	eval(t, ev, "dead_letters_growing:pending")
	if n := send(); n != 1 {
		t.Fatalf("relay published %d messages, want 1", n)
	}
	posts := expect("dead_letters_growing:ok>pending")
	first := posts[0].body
	if first.Type != alert.EventType || first.Tenant != "jejak-system" || first.Data.Value != 3 || first.Data.Threshold != 2 ||
		first.Data.Link != "/admin/alerts" || !first.Data.At.Equal(start) || !first.Data.StartedAt.Equal(start) || first.Data.Summary == "" {
		t.Fatalf("first notification: %+v", first)
	}

	// A transition whose evaluation rolls back publishes nothing.
	clk.Advance(time.Minute)
	failAfterNotify = true
	if _, err := ev.EvaluateOnce(ctx); err == nil {
		t.Fatal("the failing evaluation succeeded")
	}
	failAfterNotify = false
	if n := count(`SELECT count(*) FROM outbox_messages WHERE event_type = $1`, alert.EventType); n != 1 {
		t.Fatalf("%d alert messages in the outbox after a rolled-back transition, want 1", n)
	}
	if n := send(); n != 0 {
		t.Fatalf("relay published %d messages after a rollback, want 0", n)
	}
	expect("dead_letters_growing:ok>pending")

	eval(t, ev, "dead_letters_growing:firing") // the same minute, committed this time
	send()
	posts = expect("dead_letters_growing:ok>pending", "dead_letters_growing:pending>firing")
	if got := posts[1].body.Data; !got.StartedAt.Equal(start) || !got.At.Equal(start.Add(time.Minute)) {
		t.Fatalf("firing notification times: started %s at %s", got.StartedAt, got.At)
	}

	clk.Advance(11 * time.Minute) // the 10-minute window moves past the dead letters
	eval(t, ev, "dead_letters_growing:resolved")
	send()
	posts = expect("dead_letters_growing:ok>pending", "dead_letters_growing:pending>firing", "dead_letters_growing:firing>resolved")
	ids := map[string]bool{}
	for _, p := range posts {
		ids[p.id] = true
	}
	if len(ids) != 3 {
		t.Fatalf("webhook ids %v: want three distinct events", ids)
	}

	// Staff see every notification delivered, and the endpoint's latest.
	o, err := alert.NewService(db.System, ev.Rules()).SecretFromEnv(true).Overview(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.History) != 3 {
		t.Fatalf("history: %+v", o.History)
	}
	for _, h := range o.History {
		if !h.Notice.Sent || h.Notice.DeliveryState != webhook.StateSucceeded || h.Notice.LastStatus != http.StatusNoContent || h.Notice.Attempts != 1 {
			t.Fatalf("notice of %s: %+v", h.State, h.Notice)
		}
	}
	if w := o.Webhook; w == nil || !w.Enabled || w.Secret != "" || w.Last == nil || w.Last.State != webhook.StateSucceeded {
		t.Fatalf("staff webhook panel: %+v", o.Webhook)
	}
}

// TestSyncSystemEndpoint: the staff endpoint follows the configuration at
// each start: created with a generated secret that later starts keep,
// pointed elsewhere, given a secret, and disabled when the URL goes away
// (its transitions then record no notification).
func TestSyncSystemEndpoint(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	events := []string{alert.EventType}
	status := func() alert.StaffWebhook {
		t.Helper()
		o, err := alert.NewService(db.System, nil).Overview(ctx, 5)
		if err != nil || o.Webhook == nil {
			t.Fatalf("overview: %+v %v", o, err)
		}
		return *o.Webhook
	}

	if ep, err := webhook.SyncSystemEndpoint(ctx, db.System, nil, webhook.SystemConfig{Events: events}); err != nil || ep.Configured {
		t.Fatalf("no URL: %+v %v", ep, err)
	}
	if o, err := alert.NewService(db.System, nil).Overview(ctx, 5); err != nil || o.Webhook != nil {
		t.Fatalf("nothing configured yet, panel: %+v %v", o, err)
	}
	ep, err := webhook.SyncSystemEndpoint(ctx, db.System, nil, webhook.SystemConfig{URL: "https://ops.example.test/a", Events: events})
	if err != nil || !ep.Configured {
		t.Fatalf("first start: %+v %v", ep, err)
	}
	generated := status().Secret
	if _, err := webhook.ParseSecret(generated); err != nil {
		t.Fatalf("generated secret %q: %v", generated, err)
	}
	if _, err := webhook.SyncSystemEndpoint(ctx, db.System, nil, webhook.SystemConfig{URL: "https://ops.example.test/b", Events: events}); err != nil {
		t.Fatal(err)
	}
	if s := status(); s.URL != "https://ops.example.test/b" || s.Secret != generated || !s.Enabled {
		t.Fatalf("second start: %+v", s)
	}
	mine, _ := webhook.NewSecret()
	if _, err := webhook.SyncSystemEndpoint(ctx, db.System, nil, webhook.SystemConfig{URL: "https://ops.example.test/b", Secret: mine, Events: events}); err != nil {
		t.Fatal(err)
	}
	if s := status(); s.Secret != mine {
		t.Fatal("the configured secret did not replace the generated one")
	}
	if _, err := webhook.SyncSystemEndpoint(ctx, db.System, nil, webhook.SystemConfig{URL: "https://ops.example.test/b", Secret: "whsec_short", Events: events}); err == nil {
		t.Fatal("a malformed secret was accepted")
	}
	if ep, err := webhook.SyncSystemEndpoint(ctx, db.System, nil, webhook.SystemConfig{Events: events}); err != nil || ep.Configured {
		t.Fatalf("URL removed: %+v %v", ep, err)
	}
	if s := status(); s.Enabled || s.DisabledReason == "" {
		t.Fatalf("URL removed but endpoint still enabled: %+v", s)
	}
	var n int
	if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM webhook_endpoints e JOIN tenants t ON t.id = e.tenant_id WHERE t.is_system`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d system endpoints (%v), want the one kept in sync", n, err)
	}
}
