package outbox_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// holdSink reports every message it is given on got and, for messages of
// the aggregates in hold, does not return until release is closed.
type holdSink struct {
	got     chan int64
	hold    map[string]bool
	release chan struct{}
}

func newHoldSink(hold ...string) *holdSink {
	s := &holdSink{got: make(chan int64, 256), hold: map[string]bool{}, release: make(chan struct{})}
	for _, a := range hold {
		s.hold[a] = true
	}
	return s
}

func (s *holdSink) Publish(ctx context.Context, msgs []outbox.Envelope) []error {
	wait := false
	for _, m := range msgs {
		s.got <- m.ID
		wait = wait || s.hold[m.AggregateID]
	}
	if wait {
		select {
		case <-s.release:
		case <-ctx.Done():
		}
	}
	return make([]error, len(msgs))
}

// receive waits (at most 10 s, far below the relays' hourly poll) for the
// sink to be given id.
func (s *holdSink) receive(t *testing.T, id int64, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-s.got:
			if got == id {
				return
			}
		case <-deadline:
			t.Fatalf("%s: message %d not relayed within 10 s (poll interval 1 h)", what, id)
		}
	}
}

// sleepers counts the loops of relay worker marked asleep in
// wake_listeners.
func sleepers(t *testing.T, db *testdb.DB, worker string) int {
	t.Helper()
	var n int
	if err := db.Admin.QueryRow(context.Background(), `SELECT count(*) FROM wake_listeners
		WHERE channel = 'jejak_outbox' AND listener LIKE $1 || '/%' AND asleep`, worker).Scan(&n); err != nil {
		t.Fatalf("read wake_listeners: %v", err)
	}
	return n
}

func runRelay(t *testing.T, r *outbox.Relay) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestBusyRelayInsertsDoNotNotify: while the relay's loops are awake
// (they keep finding messages; here the warm period is an hour so the test
// does not depend on timing), concurrent publishing transactions send no
// NOTIFY, so their commits do not take the NOTIFY lock; the loops still
// relay every message.
func TestBusyRelayInsertsDoNotNotify(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenant(t, db, "busy")
	w := outbox.NewWriter(nil)
	sink := newHoldSink()
	r := newRelay(t, db, outbox.RelayConfig{Sink: sink, WorkerID: "busy", PollInterval: time.Hour})
	outbox.SetWarm(r, time.Hour, 5*time.Millisecond)
	runRelay(t, r)
	first := publish(t, db, w, tenant, msg("first", 0))[0]
	sink.receive(t, first, "first message")
	if n := sleepers(t, db, "busy"); n != 0 {
		t.Fatalf("%d loops marked asleep while warm", n)
	}

	l := db.Listen(t, "jejak_outbox")
	const n = 20
	ids := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ids[i] = publish(t, db, w, tenant, msg("agg-"+strconv.Itoa(i), i))[0] })
	}
	wg.Wait()
	if got := l.Count(t); got != 0 {
		t.Fatalf("%d NOTIFYs for %d publishing transactions while the relay was awake, want none", got, n)
	}
	want := map[int64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case id := <-sink.got:
			delete(want, id)
		case <-deadline:
			t.Fatalf("%d messages not relayed by the awake relay", len(want))
		}
	}
}

// TestIdleRelayIsWokenByInsert: relay loops marked asleep are woken by the
// insert's NOTIFY (their poll is an hour), also while another relay on the
// database is busy and awake (its only loop is stuck publishing).
func TestIdleRelayIsWokenByInsert(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenant(t, db, "idle")
	w := outbox.NewWriter(nil)
	stuck := newHoldSink("stuck")
	t.Cleanup(func() { close(stuck.release) })
	// Two relays claiming side by side, as during a handover of the lease.
	busy := newRelay(t, db, outbox.RelayConfig{Sink: stuck, WorkerID: "busy", Concurrency: 1, PollInterval: time.Hour,
		PublishTimeout: time.Minute, Unleased: true})
	outbox.SetWarm(busy, time.Hour, 5*time.Millisecond)
	runRelay(t, busy)
	first := publish(t, db, w, tenant, msg("stuck", 0))[0]
	stuck.receive(t, first, "the busy relay's message")

	pool2, err := database.OpenSystem(context.Background(), db.URL, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool2.Close)
	sink := newHoldSink()
	idle := newRelay(t, db, outbox.RelayConfig{Pool: pool2, Sink: sink, WorkerID: "idle", PollInterval: time.Hour, Unleased: true})
	runRelay(t, idle)
	for round := range 3 {
		testwait.For(t, "both loops of the idle relay marked asleep", func() bool { return sleepers(t, db, "idle") == 2 })
		if n := sleepers(t, db, "busy"); n != 0 {
			t.Fatal("the busy relay is marked asleep")
		}
		id := publish(t, db, w, tenant, msg("free", round))[0]
		sink.receive(t, id, "round "+strconv.Itoa(round))
	}
}

// TestMessageInsertedAsRelayFallsAsleepIsRelayed: a message whose insert
// saw the relay awake (so sent no NOTIFY) but committed only after the
// relay's loop had marked itself asleep is still relayed at once, not
// after the poll interval: the loop does not sleep before such
// transactions have ended.
func TestMessageInsertedAsRelayFallsAsleepIsRelayed(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenant(t, db, "racer")
	w := outbox.NewWriter(nil)
	sink := newHoldSink("first")
	// A batch of one is full: the loop marks itself awake when it takes
	// the first message, and stays awake while that is being published.
	r := newRelay(t, db, outbox.RelayConfig{Sink: sink, WorkerID: "racer", Concurrency: 1, BatchSize: 1,
		PollInterval: time.Hour, PublishTimeout: time.Minute})
	outbox.SetWarm(r, 300*time.Millisecond, 5*time.Millisecond)
	runRelay(t, r)
	first := publish(t, db, w, tenant, msg("first", 0))[0]
	sink.receive(t, first, "first message")
	if n := sleepers(t, db, "racer"); n != 0 {
		t.Fatal("the loop is marked asleep while it publishes")
	}
	l := db.Listen(t, "jejak_outbox")

	tx, err := db.App.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := database.ScopeTx(ctx, tx, tenant); err != nil {
		t.Fatal(err)
	}
	second, err := w.Publish(ctx, tx, tenant, msg("second", 1))
	if err != nil {
		t.Fatal(err)
	}
	// The first message settles; the loop finds nothing (the second is
	// not committed), and after its warm period marks itself asleep. It
	// must not sleep while the insert is open: it cannot take the wake
	// lock the insert holds, so it claims on as an awake loop does.
	close(sink.release)
	testwait.For(t, "the loop marked asleep", func() bool { return sleepers(t, db, "racer") == 1 })
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	sink.receive(t, second, "message committed as the loop fell asleep")
	if got := l.Count(t); got != 0 {
		t.Fatalf("%d NOTIFYs: the test meant the insert to see the loop awake", got)
	}
}

// batchSink reports the size of every batch it is given.
type batchSink struct{ sizes chan int }

func (s *batchSink) Publish(_ context.Context, msgs []outbox.Envelope) []error {
	s.sizes <- len(msgs)
	return make([]error, len(msgs))
}

// next waits (at most 10 s) for the sink's next batch and returns its size.
func (s *batchSink) next(t *testing.T) int {
	t.Helper()
	select {
	case n := <-s.sizes:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no batch relayed within 10 s (poll interval 1 h)")
		return 0
	}
}

// TestRelayLingersAfterAPartialBatch: after a claim that took everything
// claimable, the loop waits its linger before claiming again, so messages
// committed one by one meanwhile go out in one batch, not a claim each
// (the loop is awake: each commit would wake it at once).
func TestRelayLingersAfterAPartialBatch(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenant(t, db, "linger")
	w := outbox.NewWriter(nil)
	sink := &batchSink{sizes: make(chan int, 64)}
	r := newRelay(t, db, outbox.RelayConfig{Sink: sink, WorkerID: "linger", Concurrency: 1, PollInterval: time.Hour,
		Linger: 3 * time.Second})
	outbox.SetWarm(r, time.Hour, 5*time.Millisecond)
	runRelay(t, r)
	publish(t, db, w, tenant, msg("first", 0))
	if n := sink.next(t); n != 1 {
		t.Fatalf("first batch: %d messages, want 1", n)
	}
	for i := range 5 {
		publish(t, db, w, tenant, msg("later-"+strconv.Itoa(i), i))
	}
	if n := sink.next(t); n != 5 {
		t.Fatalf("messages committed one by one during the linger went out %d in the next batch, want all 5", n)
	}
}

// TestRelayBehindItsPublishesDoesNotLinger: a loop that had to wait for
// its previous batch's publish claims again at once, however long its
// linger: the wait already gathered what committed meanwhile, and
// lingering on top kept a relay with a backlog behind.
func TestRelayBehindItsPublishesDoesNotLinger(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenant(t, db, "behind")
	w := outbox.NewWriter(nil)
	// Each publish waits until the test takes its batch.
	sink := &gateSink{sizes: make(chan int)}
	r := newRelay(t, db, outbox.RelayConfig{Sink: sink, WorkerID: "behind", Concurrency: 1, PollInterval: time.Hour,
		BatchSize: 2, Linger: time.Hour})
	outbox.SetWarm(r, time.Hour, 5*time.Millisecond)
	// A full batch (a1, a2), then b: claimed while the first is still
	// being published, a partial batch after which the loop waits for it.
	publish(t, db, w, tenant, msg("a1", 0), msg("a2", 1), msg("b", 2))
	runRelay(t, r)
	state := func(agg string) string {
		t.Helper()
		var s string
		if err := db.Admin.QueryRow(context.Background(),
			"SELECT state FROM outbox_messages WHERE aggregate_id = $1", agg).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	testwait.For(t, "b to be claimed while the first batch is out", func() bool { return state("b") == "processing" })
	publish(t, db, w, tenant, msg("c", 3))
	if n := sink.next(t); n != 2 {
		t.Fatalf("first batch: %d messages, want 2", n)
	}
	// The first publish is done: the loop, behind, claims c at once
	// instead of lingering for an hour.
	testwait.For(t, "c to be claimed without a linger", func() bool { return state("c") == "processing" })
	for _, want := range []int{1, 1} { // b's batch, then c's
		if n := sink.next(t); n != want {
			t.Fatalf("next batch: %d messages, want %d", n, want)
		}
	}
}

// gateSink publishes a batch once the test takes its size (next), or
// fails it when the relay stops first.
type gateSink struct{ sizes chan int }

func (s *gateSink) Publish(ctx context.Context, msgs []outbox.Envelope) []error {
	errs := make([]error, len(msgs))
	select {
	case s.sizes <- len(msgs):
	case <-ctx.Done():
		for i := range errs {
			errs[i] = ctx.Err()
		}
	}
	return errs
}

func (s *gateSink) next(t *testing.T) int {
	t.Helper()
	return (&batchSink{sizes: s.sizes}).next(t)
}
