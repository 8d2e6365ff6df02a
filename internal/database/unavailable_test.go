package database

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestUnavailable(t *testing.T) {
	t.Parallel()
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("parse database url: bad"), false},
		{fmt.Errorf("tenant pool: %w", dial), true},
		{fmt.Errorf("log in: %w", syscall.ECONNRESET), true},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{&pgconn.PgError{Code: "57P03"}, true},                          // cannot_connect_now: starting up
		{&pgconn.PgError{Code: "57P01"}, true},                          // admin_shutdown
		{&pgconn.PgError{Code: "08006"}, true},                          // connection_failure
		{&pgconn.PgError{Code: "28P01"}, false},                         // wrong password: asking again will not help
		{&pgconn.PgError{Code: "42501"}, false},                         // insufficient privilege
		{fmt.Errorf("role: %w", &pgconn.PgError{Code: "3D000"}), false}, // no such database
	} {
		if got := Unavailable(c.err); got != c.want {
			t.Errorf("Unavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
