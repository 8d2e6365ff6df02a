package app

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/jejakhq/jejak/internal/testdb"
)

// TestServeWaitsForItsDatabase: a replica started while its database
// cannot be reached (restarting, or not up yet) keeps trying and serves
// once it answers, instead of exiting.
func TestServeWaitsForItsDatabase(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	// The replica's database address: nothing listens there until serve
	// has said it will try again.
	u.Host = freeAddr(t)
	logs := &signalWriter{want: []byte("database unavailable; trying again"), seen: make(chan struct{})}
	// Registered before serve's clean-up, so it runs after it: the
	// forwarder stops once serve has.
	ended := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(ended); wg.Wait() })
	wg.Go(func() {
		select {
		case <-logs.seen:
			forward(t, u.Host, target, ended)
		case <-ended:
		}
	})
	// Fails when serve ends early or its dashboard is not up in time.
	serveLogging(t, map[string]string{"DATABASE_URL": u.String(), "JEJAK_ADDR": freeAddr(t),
		"JEJAK_WORKERS": "2", "JEJAK_DB_CONNS": "4", "JEJAK_DATA_DIR": t.TempDir()},
		slog.New(slog.NewTextHandler(logs, nil)))
}

// forward accepts connections on addr until ended and relays each to
// target.
func forward(t *testing.T, addr, target string, ended <-chan struct{}) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Errorf("listen on the database's address: %v", err)
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	go func() { <-ended; ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Go(func() {
			defer c.Close()
			d, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer d.Close()
			go func() { _, _ = io.Copy(d, c); d.Close() }()
			_, _ = io.Copy(c, d)
		})
	}
}

// signalWriter closes seen the first time a write contains want.
type signalWriter struct {
	want []byte
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}
