package outbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// countSink records which messages it was given.
type countSink struct {
	mu  sync.Mutex
	ids []int64
}

func (s *countSink) Publish(_ context.Context, msgs []outbox.Envelope) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.ids = append(s.ids, m.ID)
	}
	return make([]error, len(msgs))
}

func (s *countSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

// TestOneRelayClaimsAtATime: of two relays on one database only the one
// holding the relay lease claims, one message after another, while both
// are awake; when it stops, the other takes the lease and relays the
// rest; when the holder's session is ended under it, relaying goes on.
func TestOneRelayClaimsAtATime(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenant(t, db, "toko")
	w := outbox.NewWriter(nil)
	sinkA, sinkB := &countSink{}, &countSink{}
	cfg := func(id string, sink outbox.Sink) outbox.RelayConfig {
		return outbox.RelayConfig{Sink: sink, WorkerID: id, PollInterval: 10 * time.Millisecond,
			ElectEvery: 20 * time.Millisecond}
	}
	a := newRelay(t, db, cfg("a", sinkA))
	b := newRelay(t, db, cfg("b", sinkB))
	actx, stopA := context.WithCancel(context.Background())
	aDone := make(chan struct{})
	go func() { a.Run(actx); close(aDone) }()
	t.Cleanup(func() { stopA(); <-aDone })
	testwait.For(t, "relay a to take the lease", func() bool { return outbox.Leased(a) })
	runRelay(t, b)

	delivered := func(n int) func() bool {
		return func() bool { return states(t, db)["delivered"] == n }
	}
	// One at a time, so that every message is a race between the two
	// relays' loops, which without the lease b would win about half of.
	const rounds = 20
	for i := range rounds {
		publish(t, db, w, tenant, msg("order", i))
		testwait.For(t, "the message relayed", delivered(i+1))
	}
	if na, nb := sinkA.count(), sinkB.count(); na != rounds || nb != 0 {
		t.Fatalf("the holder relayed %d and the standby %d, want %d and 0", na, nb, rounds)
	}
	if outbox.Leased(b) {
		t.Fatal("both relays hold the lease")
	}

	stopA()
	<-aDone
	testwait.For(t, "relay b to take the lease", func() bool { return outbox.Leased(b) })
	publish(t, db, w, tenant, msg("order", rounds))
	testwait.For(t, "the message relayed by b", delivered(rounds+1))
	if sinkB.count() != 1 {
		t.Fatalf("b relayed %d after a stopped, want 1", sinkB.count())
	}

	// The holder's session ended by the server: b notices at its next
	// try, and whoever holds the lease then relays.
	var ended int
	if err := db.Admin.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND objid = 727280 AND objsubid = 1
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&ended); err != nil || ended != 1 {
		t.Fatalf("end the lease's session: %d ended (%v)", ended, err)
	}
	publish(t, db, w, tenant, msg("order", rounds+1))
	testwait.For(t, "the message relayed after the holder's session ended", delivered(rounds+2))
}
