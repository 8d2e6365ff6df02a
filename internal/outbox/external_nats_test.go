package outbox_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/jejakhq/jejak/internal/natsbus"
	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestRelayPublishesToTheConfiguredNATS: with a URL (NATS_URL), Jejak
// starts no server of its own, declares its stream on the server it was
// given, and a plain subscriber on jejak.> there receives the event with
// the outbox id as Nats-Msg-Id.
func TestRelayPublishesToTheConfiguredNATS(t *testing.T) {
	t.Parallel()
	// The machine's NATS, outside Jejak: a separate nats-server with JetStream.
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT,
		JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(ns.Shutdown)

	sub, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	got := make(chan *nats.Msg, 4)
	if _, err := sub.ChanSubscribe("jejak.>", got); err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}

	bus, err := natsbus.Open(context.Background(), natsbus.Config{URL: ns.ClientURL(), DataDir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatalf("open NATS at the configured URL: %v", err)
	}
	t.Cleanup(bus.Close)
	if bus.Embedded {
		t.Fatal("a configured URL started an embedded server")
	}

	db := testdb.New(t)
	tid := newTenant(t, db, "toko")
	ids := publish(t, db, outbox.NewWriter(nil), tid, msg("42", 1))
	r := newRelay(t, db, outbox.RelayConfig{Sink: natsbus.Sink{JS: bus.JS}})
	if n, err := r.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v; want 1 message", n, err)
	}
	select {
	case m := <-got:
		if want := natsbus.Subject("toko", "project.updated"); m.Subject != want {
			t.Errorf("subject %q, want %q", m.Subject, want)
		}
		if id := m.Header.Get(nats.MsgIdHdr); id != strconv.FormatInt(ids[0], 10) {
			t.Errorf("Nats-Msg-Id %q, want the outbox id %d", id, ids[0])
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no message reached the subscriber on the configured server")
	}
	// Stored by the stream on that server, not only passed through.
	if got := streamIDs(t, bus); len(got) != 1 || got[0] != ids[0] {
		t.Fatalf("stream on the configured server holds %v, want [%d]", got, ids[0])
	}
}
