package database_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestWakeNotifyOnlyForSleepers: wake_notify (what the jobs and outbox
// insert triggers call, as the inserting role) sends a NOTIFY only while
// some claim loop of the channel is marked asleep, or when the transaction
// is not READ COMMITTED (its snapshot could hide a loop that has just
// marked itself). The tenant role cannot touch wake_listeners itself.
func TestWakeNotifyOnlyForSleepers(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	l := db.Listen(t, "jejak_jobs")
	notifyAs := func(iso pgx.TxIsoLevel) {
		t.Helper()
		tx, err := db.App.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		if _, err := tx.Exec(ctx, "SELECT wake_notify('jejak_jobs')"); err != nil {
			t.Fatalf("wake_notify as jejak_app: %v", err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mark := func(listener string, asleep bool) {
		t.Helper()
		if _, err := db.System.Exec(ctx, `INSERT INTO wake_listeners (channel, listener, asleep, expires_at)
			VALUES ('jejak_jobs', $1, $2, now() + interval '1 hour')
			ON CONFLICT (channel, listener) DO UPDATE SET asleep = excluded.asleep`, listener, asleep); err != nil {
			t.Fatalf("mark %s: %v", listener, err)
		}
	}
	expect := func(what string, want int) {
		t.Helper()
		if got := l.Count(t); got != want {
			t.Fatalf("%s: %d NOTIFYs, want %d", what, got, want)
		}
	}

	notifyAs(pgx.ReadCommitted)
	expect("no loop registered", 0)
	mark("a", false)
	mark("b", false)
	notifyAs(pgx.ReadCommitted)
	expect("every loop awake", 0)
	notifyAs(pgx.RepeatableRead)
	expect("repeatable read, every loop awake", 1)
	mark("b", true)
	notifyAs(pgx.ReadCommitted)
	notifyAs(pgx.ReadCommitted)
	expect("one loop asleep", 2)
	if _, err := db.Admin.Exec(ctx, "INSERT INTO wake_listeners (channel, listener, asleep, expires_at) VALUES ('jejak_outbox', 'c', true, now() + interval '1 hour')"); err != nil {
		t.Fatal(err)
	}
	mark("b", false)
	notifyAs(pgx.ReadCommitted)
	expect("asleep on the other channel only", 0)

	for _, stmt := range []string{
		"SELECT count(*) FROM wake_listeners",
		"UPDATE wake_listeners SET asleep = true",
		"INSERT INTO wake_listeners (channel, listener, asleep, expires_at) VALUES ('jejak_jobs', 'x', true, now())",
		"DELETE FROM wake_listeners",
	} {
		_, err := db.App.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("jejak_app %q: %v, want permission denied", stmt, err)
		}
	}
}

// TestPruneSleepersDeletesExpiredRowsOnly: rows past expires_at (a loop
// that died asleep) go; live ones stay.
func TestPruneSleepersDeletesExpiredRowsOnly(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	if _, err := db.System.Exec(ctx, `INSERT INTO wake_listeners (channel, listener, asleep, expires_at) VALUES
		('jejak_jobs', 'dead', true, now() - interval '1 second'),
		('jejak_outbox', 'live', true, now() + interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	n, err := database.PruneSleepers(ctx, db.System)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want 1", n, err)
	}
	var left string
	if err := db.Admin.QueryRow(ctx, "SELECT string_agg(listener, ',') FROM wake_listeners").Scan(&left); err != nil || left != "live" {
		t.Fatalf("left %q (%v), want live", left, err)
	}
}

// TestWakeNotifyOutboxOnlyWhenNoRelayLoopIsAwake: on the outbox channel an
// awake relay loop takes any message, so a sleeping second loop needs no
// NOTIFY while another is awake; the jobs channel still notifies while any
// producer sleeps (an awake one may have no free worker).
func TestWakeNotifyOutboxOnlyWhenNoRelayLoopIsAwake(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	for _, c := range []struct {
		channel string
		want    int // NOTIFYs with one loop asleep and one awake
	}{{"jejak_outbox", 0}, {"jejak_jobs", 1}} {
		l := db.Listen(t, c.channel)
		mark := func(listener string, asleep bool) {
			t.Helper()
			if _, err := db.System.Exec(ctx, `INSERT INTO wake_listeners (channel, listener, asleep, expires_at)
				VALUES ($1, $2, $3, now() + interval '1 hour')
				ON CONFLICT (channel, listener) DO UPDATE SET asleep = excluded.asleep`, c.channel, listener, asleep); err != nil {
				t.Fatalf("mark %s: %v", listener, err)
			}
		}
		notify := func() {
			t.Helper()
			if _, err := db.App.Exec(ctx, "SELECT wake_notify($1)", c.channel); err != nil {
				t.Fatalf("wake_notify(%s): %v", c.channel, err)
			}
		}
		mark("a", true)
		mark("b", false)
		notify()
		if got := l.Count(t); got != c.want {
			t.Errorf("%s, one loop asleep and one awake: %d NOTIFYs, want %d", c.channel, got, c.want)
		}
		mark("b", true)
		notify()
		if got := l.Count(t); got != 1 {
			t.Errorf("%s, every loop asleep: %d NOTIFYs, want 1", c.channel, got)
		}
	}
}

// TestSleeperNeverQueuesInserts: a loop going to sleep while an insert that
// saw it awake is still open does not wait for that insert's lock (a
// waiting exclusive request would queue every later insert of the channel
// behind it); it keeps claiming as an awake loop does (and is one again
// when rows keep coming), and once the insert has ended it settles, claims
// once more and sleeps.
func TestSleeperNeverQueuesInserts(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	const poll, warmPoll = time.Hour, 7 * time.Millisecond
	s := database.NewSleeper(database.SleeperConfig{Pool: db.System, Channel: "jejak_outbox", Listener: "relay-1",
		Poll: poll, WarmFor: -1, WarmPoll: warmPoll})

	// An insert that saw the loop awake: it holds the wake lock shared
	// until it ends.
	insert, err := db.App.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer insert.Rollback(ctx) //nolint:errcheck
	if _, err := insert.Exec(ctx, "SELECT wake_notify('jejak_outbox')"); err != nil {
		t.Fatal(err)
	}

	// Watch for any advisory lock request left waiting while the loop
	// decides, until told to stop.
	stop := make(chan struct{})
	waited := make(chan int)
	go func() {
		seen := 0
		for {
			select {
			case <-stop:
				waited <- seen
				return
			default:
			}
			var n int
			if err := db.Admin.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").Scan(&n); err == nil {
				seen += n
			}
		}
	}()
	if d := s.Next(ctx, 0, false, nil); d != 0 || !s.Asleep() {
		t.Fatalf("first idle claim: wait %v asleep=%v, want the claim after the mark at once, asleep", d, s.Asleep())
	}
	for i := 0; i < 20; i++ {
		if d := s.Next(ctx, 0, false, nil); d != warmPoll {
			t.Fatalf("claim %d with the insert open: wait %v, want %v (claim on as an awake loop)", i, d, warmPoll)
		}
	}
	close(stop)
	if n := <-waited; n != 0 {
		t.Fatalf("the loop left an advisory lock request waiting (%d samples): inserts queue behind it", n)
	}
	// Work arriving while it is still unsettled makes it awake at once.
	s.Woken()
	s.Again()
	if d := s.Next(ctx, 1, false, nil); d != warmPoll || s.Asleep() {
		t.Fatalf("rows keep coming while unsettled: wait %v asleep=%v, want %v awake", d, s.Asleep(), warmPoll)
	}
	if err := insert.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if d := s.Next(ctx, 0, false, nil); d != 0 || !s.Asleep() {
		t.Fatalf("idle again, the insert ended: wait %v asleep=%v, want 0 (the claim that sees its row), asleep", d, s.Asleep())
	}
	if d := s.Next(ctx, 0, false, nil); d != poll {
		t.Fatalf("settled: wait %v, want the poll %v", d, poll)
	}
}

// TestListenLeavesThePoolItsConnections: a listener waits on a connection
// of its own, so a pool of one connection still runs statements while it
// listens, and a NOTIFY sent through that pool still wakes it.
func TestListenLeavesThePoolItsConnections(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := db.System.Config().Copy()
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	wakes := make(chan struct{}, 16)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		database.Listen(ctx, pool, "jejak_test_listen", time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)), func() { wakes <- struct{}{} })
	}()
	defer func() { cancel(); <-stopped }()
	waitWake := func(what string) {
		t.Helper()
		select {
		case <-wakes:
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake-up %s", what)
		}
	}
	waitWake("once LISTEN is in place")
	stmtCtx, stmtCancel := context.WithTimeout(ctx, 5*time.Second)
	defer stmtCancel()
	if _, err := pool.Exec(stmtCtx, "SELECT pg_notify('jejak_test_listen', '')"); err != nil {
		t.Fatalf("a statement on the pool while a listener waits: %v", err)
	}
	waitWake("for the NOTIFY sent through the pool")
}
