package database

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Election chooses one holder among the replicas that share a database:
// the one whose session holds pg_try_advisory_lock(Key). The session is a
// connection of its own (OwnConn), kept between tries whether or not this
// replica holds the lock, so holding takes none of the pool's connections
// and the holder's work never waits for one to call itself holder. The
// lock dies with the session, so a crashed holder is replaced at the next
// try of another replica.
//
// An Election is driven by one goroutine, which calls Elect every beat.
type Election struct {
	Pool *pgxpool.Pool
	Key  int64
	// Silence is the holder's idle_session_timeout: should it be cut off
	// without its connection closing, the server ends its session after
	// this long and another replica can take over. The holder speaks
	// every beat (Elect pings), so a beat must be shorter.
	Silence time.Duration
	// OnChange, when set, is called as this replica becomes holder (true)
	// or stops being one (false).
	OnChange func(holding bool)

	conn    *pgx.Conn
	holding bool
}

// Elect returns the session while this replica holds the lock (it holds it
// there), else nil: it tries for the lock when it does not hold it, and
// checks that the holder's session is still there when it does.
func (e *Election) Elect(ctx context.Context) *pgx.Conn {
	// A session that is gone (the idle timeout, a terminated backend, a
	// restarted server) no longer holds the lock: stop holding and try
	// again at once. A session that does not hold it needs no ping: its
	// try fails on a dead session, which is replaced at the next beat.
	if e.holding && e.conn.Ping(ctx) != nil {
		if ctx.Err() != nil {
			return e.conn
		}
		e.Drop()
	}
	if e.conn == nil {
		c, err := OwnConn(ctx, e.Pool)
		if err != nil {
			return nil
		}
		e.conn = c
	}
	if e.holding {
		return e.conn
	}
	var got bool
	if err := e.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", e.Key).Scan(&got); err != nil {
		e.Drop()
		return nil
	}
	if !got {
		return nil
	}
	if _, err := e.conn.Exec(ctx, "SELECT set_config('idle_session_timeout', $1, false)",
		fmt.Sprintf("%dms", e.Silence.Milliseconds())); err != nil {
		e.Drop()
		return nil
	}
	e.holding = true
	if e.OnChange != nil {
		e.OnChange(true)
	}
	return e.conn
}

// Drop closes the session, and with it the lock if held.
func (e *Election) Drop() {
	if e.conn != nil {
		CloseOwn(e.conn)
		e.conn = nil
	}
	if e.holding {
		e.holding = false
		if e.OnChange != nil {
			e.OnChange(false)
		}
	}
}
