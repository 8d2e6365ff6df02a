package testdb

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Listener receives the notifications of one channel from the moment
// DB.Listen returns.
type Listener struct {
	db      *DB
	conn    *pgxpool.Conn
	channel string
}

// Listen runs LISTEN channel on a connection of its own (closed when t
// ends).
func (db *DB) Listen(t testing.TB, channel string) *Listener {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Admin.Acquire(ctx)
	if err != nil {
		t.Fatalf("testdb: acquire listener connection: %v", err)
	}
	t.Cleanup(func() { conn.Conn().Close(context.Background()); conn.Release() }) //nolint:errcheck
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		t.Fatalf("testdb: LISTEN %s: %v", channel, err)
	}
	return &Listener{db: db, conn: conn, channel: channel}
}

// Count sends a marker notification and returns how many notifications
// arrived before it: every one sent by a transaction that committed
// before Count was called (notifications are delivered in commit order).
func (l *Listener) Count(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const marker = "testdb-listener-marker"
	if _, err := l.db.Admin.Exec(ctx, "SELECT pg_notify($1, $2)", l.channel, marker); err != nil {
		t.Fatalf("testdb: send marker on %s: %v", l.channel, err)
	}
	n := 0
	for {
		msg, err := l.conn.Conn().WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("testdb: wait for notifications on %s (%d so far): %v", l.channel, n, err)
		}
		if msg.Channel == l.channel && msg.Payload == marker {
			return n
		}
		n++
	}
}
