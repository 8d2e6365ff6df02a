package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/natsbus"
	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/testdb"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newTenant(t *testing.T, db *testdb.DB, slug string) int64 {
	t.Helper()
	var id int64
	if err := db.Admin.QueryRow(context.Background(),
		"INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id", slug).Scan(&id); err != nil {
		t.Fatalf("insert tenant: %v", err)
	}
	return id
}

// newBus starts a real in-process nats-server with JetStream (the embedded
// path Jejak uses when NATS_URL is unset).
func newBus(t *testing.T) *natsbus.Bus {
	t.Helper()
	b, err := natsbus.Open(context.Background(), natsbus.Config{DataDir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatalf("open NATS: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

func newRelay(t *testing.T, db *testdb.DB, cfg outbox.RelayConfig) *outbox.Relay {
	t.Helper()
	if cfg.Pool == nil {
		cfg.Pool = db.System
	}
	cfg.Logger = quiet
	r, err := outbox.NewRelay(cfg)
	if err != nil {
		t.Fatalf("new relay: %v", err)
	}
	return r
}

func publish(t *testing.T, db *testdb.DB, w *outbox.Writer, tenantID int64, ms ...outbox.Message) []int64 {
	t.Helper()
	var ids []int64
	err := database.InTenantTx(context.Background(), db.App, tenantID, func(tx pgx.Tx) error {
		for _, m := range ms {
			id, err := w.Publish(context.Background(), tx, tenantID, m)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return ids
}

// streamIDs reads every message of the stream, in stream order, as outbox ids.
func streamIDs(t *testing.T, b *natsbus.Bus) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	info, err := b.Stream.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	n := int(info.State.Msgs)
	if n == 0 {
		return nil
	}
	c, err := b.Stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("ordered consumer: %v", err)
	}
	var out []int64
	for len(out) < n {
		batch, err := c.Fetch(n-len(out), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		for m := range batch.Messages() {
			id, _, err := natsbus.EventOf(m)
			if err != nil {
				t.Fatalf("event headers: %v", err)
			}
			out = append(out, id)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			t.Fatalf("fetch batch: %v", err)
		}
	}
	return out
}

func states(t *testing.T, db *testdb.DB) map[string]int {
	t.Helper()
	rows, err := db.Admin.Query(context.Background(), "SELECT state, count(*) FROM outbox_messages GROUP BY state")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

func msg(agg string, i int) outbox.Message {
	return outbox.Message{Type: "project.updated", AggregateType: "project", AggregateID: agg,
		Payload: map[string]any{"seq": i, "aggregate": agg}}
}

func TestRollbackPublishesNothing(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	bus := newBus(t)
	tid := newTenant(t, db, "toko")
	w := outbox.NewWriter(nil)
	boom := errors.New("domain write failed")
	err := database.InTenantTx(context.Background(), db.App, tid, func(tx pgx.Tx) error {
		if _, err := w.Publish(context.Background(), tx, tid, msg("rolled-back", 1)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("tx error = %v", err)
	}
	kept := publish(t, db, w, tid, msg("kept", 1))
	r := newRelay(t, db, outbox.RelayConfig{Sink: natsbus.Sink{JS: bus.JS}})
	if n, err := r.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v; want 1 message", n, err)
	}
	if got := streamIDs(t, bus); len(got) != 1 || got[0] != kept[0] {
		t.Fatalf("stream holds %v, want only the committed message %d", got, kept[0])
	}
	if s := states(t, db); s["delivered"] != 1 || len(s) != 1 {
		t.Fatalf("states = %v", s)
	}
}

func TestPublishRefusesBadInputAndAppCannotRead(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	w := outbox.NewWriter(nil)
	for name, m := range map[string]outbox.Message{
		"type":      {Type: "Project Deleted", AggregateType: "project", AggregateID: "1"},
		"array":     {Type: "project.deleted", AggregateType: "project", AggregateID: "1", Payload: []byte(`[1]`)},
		"bad json":  {Type: "project.deleted", AggregateType: "project", AggregateID: "1", Payload: []byte(`{"a":`)},
		"no aggr":   {Type: "project.deleted", AggregateType: "", AggregateID: "1"},
		"nul":       {Type: "project.deleted", AggregateType: "project", AggregateID: "1", Payload: []byte(`{"a":"\u0000"}`)},
		"subject>":  {Type: "project.>", AggregateType: "project", AggregateID: "1"},
		"empty tok": {Type: "project..deleted", AggregateType: "project", AggregateID: "1"},
	} {
		err := database.InTenantTx(context.Background(), db.App, tid, func(tx pgx.Tx) error {
			_, err := w.Publish(context.Background(), tx, tid, m)
			return err
		})
		if !errors.Is(err, outbox.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	publish(t, db, w, tid, msg("a", 1))
	if s := states(t, db); s["pending"] != 1 || len(s) != 1 {
		t.Fatalf("states = %v, want the one valid message", s)
	}
	// The tenant-facing role may add messages but not read or change them.
	err := database.InTenantTx(context.Background(), db.App, tid, func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), "SELECT payload FROM outbox_messages")
		return err
	})
	if err == nil {
		t.Fatal("jejak_app read outbox payloads")
	}
}

// A relay that dies after publishing and before marking loses nothing: its
// reservations are reclaimed after ten minutes, another relay publishes
// again, and JetStream absorbs the duplicates by message id.
func TestRelayCrashMidBatchLosesNothing(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	bus := newBus(t)
	tid := newTenant(t, db, "toko")
	clk := clock.NewFrozen(time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC))
	w := outbox.NewWriter(clk)
	var ms []outbox.Message
	for i := range 60 {
		ms = append(ms, msg(fmt.Sprintf("agg-%d", i), 1))
	}
	ids := publish(t, db, w, tid, ms...)
	sink := natsbus.Sink{JS: bus.JS}

	a := newRelay(t, db, outbox.RelayConfig{Sink: sink, Clock: clk, WorkerID: "relay-a", BatchSize: 40})
	outbox.SetAfterPublish(a, func([]outbox.Envelope) bool { return true })
	if n, err := a.RunOnce(context.Background()); n != 40 || err == nil {
		t.Fatalf("crashing relay: %d, %v", n, err)
	}
	if got := len(streamIDs(t, bus)); got != 40 {
		t.Fatalf("stream holds %d, want the 40 published before the crash", got)
	}
	b := newRelay(t, db, outbox.RelayConfig{Sink: sink, Clock: clk, WorkerID: "relay-b", BatchSize: 100})
	// The crashed batch is still reserved: b takes only the other 20.
	if n, err := b.RunOnce(context.Background()); n != 20 || err != nil {
		t.Fatalf("relay b first pass: %d, %v", n, err)
	}
	if err := b.Maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := states(t, db); s["processing"] != 40 {
		t.Fatalf("reclaimed too early: %v", s)
	}
	clk.Advance(outbox.DefaultReclaimAfter + time.Minute)
	if err := b.Maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, err := b.RunOnce(context.Background()); n != 40 || err != nil {
		t.Fatalf("relay b after reclaim: %d, %v", n, err)
	}
	if s := states(t, db); s["delivered"] != 60 || len(s) != 1 {
		t.Fatalf("states = %v, want all 60 delivered", s)
	}
	got := streamIDs(t, bus)
	if len(got) != 60 {
		t.Fatalf("stream holds %d messages, want 60 (duplicates absorbed by Nats-Msg-Id)", len(got))
	}
	seen := map[int64]bool{}
	for _, id := range got {
		seen[id] = true
	}
	for _, id := range ids {
		if !seen[id] {
			t.Fatalf("message %d lost", id)
		}
	}
}

// blockingSink blocks until its context ends, like a broker that hangs.
type blockingSink struct{ entered chan struct{} }

func (s blockingSink) Publish(ctx context.Context, msgs []outbox.Envelope) []error {
	close(s.entered)
	<-ctx.Done()
	errs := make([]error, len(msgs))
	for i := range errs {
		errs[i] = ctx.Err()
	}
	return errs
}

// Stopping a relay mid-publish (its context cancelled) returns the batch to
// pending without spending an attempt; nothing waits for reclaim.
func TestRelayCancelledMidPublishReleases(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	w := outbox.NewWriter(nil)
	publish(t, db, w, tid, msg("a", 1), msg("b", 1))
	sink := blockingSink{entered: make(chan struct{})}
	r := newRelay(t, db, outbox.RelayConfig{Sink: sink})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := r.RunOnce(ctx); done <- err }()
	<-sink.entered
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	var pending, attempts int
	if err := db.Admin.QueryRow(context.Background(),
		"SELECT count(*), coalesce(sum(attempts), 0) FROM outbox_messages WHERE state = 'pending'").Scan(&pending, &attempts); err != nil {
		t.Fatal(err)
	}
	if pending != 2 || attempts != 0 {
		t.Fatalf("after cancel: %d pending with %d attempts, want 2 with 0", pending, attempts)
	}
}

// flakySink fails a share of messages, half of them after the broker
// stored them (a lost acknowledgement), to stress ordering with retries.
type flakySink struct {
	next outbox.Sink
	mu   sync.Mutex
	rnd  *rand.Rand
}

func (s *flakySink) Publish(ctx context.Context, msgs []outbox.Envelope) []error {
	errs := s.next.Publish(ctx, msgs)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range errs {
		if errs[i] == nil && s.rnd.IntN(5) == 0 {
			errs[i] = errors.New("acknowledgement lost")
		}
	}
	return errs
}

func TestPerAggregateOrderWithSeveralRelays(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	bus := newBus(t)
	tenants := []int64{newTenant(t, db, "toko"), newTenant(t, db, "kopi")}
	w := outbox.NewWriter(nil)
	const aggs, perAgg = 10, 20
	// Interleaved: each transaction adds one message to every aggregate.
	for i := range perAgg {
		for _, tid := range tenants {
			var ms []outbox.Message
			for a := range aggs {
				ms = append(ms, msg("agg-"+strconv.Itoa(a), i))
			}
			publish(t, db, w, tid, ms...)
		}
	}
	total := perAgg * aggs * len(tenants)
	sink := &flakySink{next: natsbus.Sink{JS: bus.JS}, rnd: rand.New(rand.NewPCG(1, 2))}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 4 {
		r := newRelay(t, db, outbox.RelayConfig{Sink: sink, WorkerID: fmt.Sprintf("relay-%d", i), BatchSize: 7,
			Concurrency: 2, PollInterval: 20 * time.Millisecond, MaxAttempts: 1000, Backoff: func(int) time.Duration { return 0 },
			// Side by side, as during a handover of the relay lease.
			Unleased: true})
		wg.Add(1)
		go func() { defer wg.Done(); r.Run(ctx) }()
	}
	deadline := time.Now().Add(60 * time.Second)
	for states(t, db)["delivered"] < total {
		if time.Now().After(deadline) {
			cancel()
			wg.Wait()
			t.Fatalf("not all delivered: %v", states(t, db))
		}
		time.Sleep(20 * time.Millisecond) // polling for an outcome, with a deadline
	}
	cancel()
	wg.Wait()

	// Outbox ids per aggregate, in id (publish) order.
	rows, err := db.Admin.Query(context.Background(), "SELECT id, tenant_id, aggregate_id FROM outbox_messages ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	aggOf := map[int64]string{}
	for rows.Next() {
		var id, tid int64
		var agg string
		if err := rows.Scan(&id, &tid, &agg); err != nil {
			t.Fatal(err)
		}
		aggOf[id] = fmt.Sprint(tid, "/", agg)
	}
	got := streamIDs(t, bus)
	if len(got) != total {
		t.Fatalf("stream holds %d messages, want %d exactly once", len(got), total)
	}
	last := map[string]int64{}
	for _, id := range got {
		a := aggOf[id]
		if id <= last[a] {
			t.Fatalf("aggregate %s: message %d reached the stream after %d", a, id, last[a])
		}
		last[a] = id
	}
}

func TestFailedAfterMaxAttemptsBlocksItsAggregateOnly(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	w := outbox.NewWriter(nil)
	ids := publish(t, db, w, tid, msg("a", 1), msg("a", 2), msg("b", 1))
	failing := failSink{id: ids[0]}
	r := newRelay(t, db, outbox.RelayConfig{Sink: failing, MaxAttempts: 2, Backoff: func(int) time.Duration { return 0 }})
	for range 4 {
		if _, err := r.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var state, lastErr string
	if err := db.Admin.QueryRow(context.Background(), "SELECT state, last_error FROM outbox_messages WHERE id = $1", ids[0]).Scan(&state, &lastErr); err != nil {
		t.Fatal(err)
	}
	if state != "failed" || lastErr != "broker refused" {
		t.Fatalf("first message: %s %q, want failed with the last error", state, lastErr)
	}
	if s := states(t, db); s["failed"] != 1 || s["pending"] != 1 || s["delivered"] != 1 {
		t.Fatalf("states = %v: want a/1 failed, a/2 held back behind it, b/1 delivered", s)
	}
}

// refuseOnceSink passes messages to JetStream but refuses the first
// publish of one message without sending it (a broker that rejected it),
// and records what each call carried.
type refuseOnceSink struct {
	next    outbox.Sink
	id      int64
	refused bool
	calls   [][]int64
}

func (s *refuseOnceSink) Publish(ctx context.Context, msgs []outbox.Envelope) []error {
	var ids []int64
	var pass []outbox.Envelope
	for _, m := range msgs {
		ids = append(ids, m.ID)
		if m.ID != s.id || s.refused {
			pass = append(pass, m)
		}
	}
	s.calls = append(s.calls, ids)
	res := s.next.Publish(ctx, pass)
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if m.ID == s.id && !s.refused {
			s.refused = true
			errs[i] = errors.New("broker refused")
			continue
		}
		errs[i], res = res[0], res[1:]
	}
	return errs
}

// A claim takes an aggregate's waiting messages together, and the relay
// sends an aggregate's next message only after its previous one was
// acknowledged: when one is refused, the ones after it are not sent and
// go back to pending without spending an attempt, and the stream still
// holds every aggregate in order.
func TestRelayKeepsARunInOrderWhenAPublishFails(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	bus := newBus(t)
	tid := newTenant(t, db, "toko")
	w := outbox.NewWriter(nil)
	ids := publish(t, db, w, tid, msg("a", 1), msg("b", 1), msg("a", 2), msg("a", 3), msg("b", 2), msg("a", 4))
	a, b := []int64{ids[0], ids[2], ids[3], ids[5]}, []int64{ids[1], ids[4]}
	sink := &refuseOnceSink{next: natsbus.Sink{JS: bus.JS}, id: a[1]}
	r := newRelay(t, db, outbox.RelayConfig{Sink: sink, Backoff: func(int) time.Duration { return 0 }})
	if n, err := r.RunOnce(context.Background()); n != len(ids) || err != nil {
		t.Fatalf("first pass claimed %d (%v), want all %d: both aggregates' runs", n, err, len(ids))
	}
	if want := [][]int64{{a[0], b[0]}, {a[1], b[1]}}; fmt.Sprint(sink.calls) != fmt.Sprint(want) {
		t.Fatalf("sink calls = %v, want each aggregate's next message only after its previous one %v", sink.calls, want)
	}
	var attempts []int32
	if err := db.Admin.QueryRow(context.Background(), `SELECT array_agg(attempts ORDER BY id) FROM outbox_messages
		WHERE id = ANY($1) AND state = 'pending'`, a[1:]).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(attempts) != "[1 0 0]" {
		t.Fatalf("attempts of a/2, a/3, a/4 = %v, want [1 0 0]: refused once, the rest never sent and pending", attempts)
	}
	if s := states(t, db); s["delivered"] != 3 || s["pending"] != 3 {
		t.Fatalf("states = %v, want a/1, b/1, b/2 delivered", s)
	}
	if n, err := r.RunOnce(context.Background()); n != 3 || err != nil {
		t.Fatalf("second pass claimed %d (%v), want a/2, a/3, a/4", n, err)
	}
	got := streamIDs(t, bus)
	var gotA, gotB []int64
	for _, id := range got {
		if slices.Contains(a, id) {
			gotA = append(gotA, id)
		} else {
			gotB = append(gotB, id)
		}
	}
	if !slices.Equal(gotA, a) || !slices.Equal(gotB, b) {
		t.Fatalf("stream holds a %v and b %v, want each once in order: %v and %v", gotA, gotB, a, b)
	}
}

type failSink struct{ id int64 }

func (s failSink) Publish(_ context.Context, msgs []outbox.Envelope) []error {
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if m.ID == s.id {
			errs[i] = errors.New("broker refused")
		}
	}
	return errs
}

// The maintenance leader prunes delivered messages past retention, and
// only those; other replicas prune nothing.
func TestPruneDeliveredOnTheLeader(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	clk := clock.NewFrozen(time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC))
	w := outbox.NewWriter(clk)
	var ms []outbox.Message
	for i := range 30 {
		ms = append(ms, msg(fmt.Sprintf("agg-%d", i), 1))
	}
	publish(t, db, w, tid, ms...)
	leader := false
	r := newRelay(t, db, outbox.RelayConfig{Clock: clk, BatchSize: 20, Retention: time.Hour, IsLeader: func() bool { return leader }})
	if n, err := r.RunOnce(context.Background()); n != 20 || err != nil {
		t.Fatal(n, err)
	}
	clk.Advance(2 * time.Hour)
	if n, err := r.RunOnce(context.Background()); n != 10 || err != nil { // delivered "now"
		t.Fatal(n, err)
	}
	publish(t, db, w, tid, msg("late", 1)) // pending
	if err := r.Maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := states(t, db); s["delivered"] != 30 {
		t.Fatalf("a follower pruned: %v", s)
	}
	leader = true
	if err := r.Maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := states(t, db); s["delivered"] != 10 || s["pending"] != 1 {
		t.Fatalf("after pruning: %v, want the 10 recent delivered and the pending one", s)
	}
}

func TestDefaultBackoffSpansMinutes(t *testing.T) {
	t.Parallel()
	want := []time.Duration{5 * time.Second, 20 * time.Second, 80 * time.Second, 320 * time.Second, 10 * time.Minute, 10 * time.Minute}
	var total time.Duration
	for i, w := range want {
		if got := outbox.DefaultBackoff(i + 1); got != w {
			t.Errorf("DefaultBackoff(%d) = %s, want %s", i+1, got, w)
		}
		if i < outbox.DefaultMaxAttempts-1 {
			total += w
		}
	}
	if total < 5*time.Minute {
		t.Fatalf("the default attempts span only %s", total)
	}
}
