// Package natsbus connects Jejak to NATS JetStream: to the server named by
// NATS_URL, or to an embedded nats-server with JetStream started in the
// same process (store under <data dir>/nats, loopback, random port) — the
// same embedded default as PostgreSQL. It declares Jejak's stream and
// provides the outbox relay's Sink.
package natsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamName is the JetStream stream holding Jejak's domain events.
const StreamName = "JEJAK"

// SubjectPrefix starts every event subject: jejak.<tenant slug>.<event type>.
const SubjectPrefix = "jejak"

// DuplicateWindow is how long the stream remembers message ids. It is
// longer than the outbox's 10-minute reclaim, so a message re-published by
// another relay after a crash is still recognised as a duplicate.
const DuplicateWindow = 20 * time.Minute

// Config says where NATS is.
type Config struct {
	// URL is NATS_URL; "" starts the embedded server.
	URL string
	// DataDir holds the embedded server's JetStream store (<DataDir>/nats).
	DataDir string
	// MaxAge bounds how long the stream keeps events; 0 = 7 days.
	MaxAge time.Duration
	Logger *slog.Logger
}

// Bus is a connection to JetStream, and the embedded server when Jejak
// started one.
type Bus struct {
	Conn     *nats.Conn
	JS       jetstream.JetStream
	Stream   jetstream.Stream
	Embedded bool
	server   *server.Server
}

// Open connects (starting the embedded server when cfg.URL is empty) and
// creates or updates the stream, which is idempotent across restarts and
// replicas.
func Open(ctx context.Context, cfg Config) (*Bus, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &Bus{}
	url := cfg.URL
	if url == "" {
		dir := filepath.Join(cfg.DataDir, "nats")
		ns, err := server.NewServer(&server.Options{
			ServerName: "jejak-embedded", Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true,
		})
		if err != nil {
			return nil, fmt.Errorf("embedded nats-server: %w", err)
		}
		go ns.Start()
		if !ns.ReadyForConnections(30 * time.Second) {
			ns.Shutdown()
			return nil, errors.New("embedded nats-server did not start within 30s")
		}
		b.server, b.Embedded, url = ns, true, ns.ClientURL()
		cfg.Logger.Info("embedded NATS JetStream ready", "url", url, "dir", dir)
	}
	nc, err := nats.Connect(url, nats.Name("jejak"), nats.MaxReconnects(-1))
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("connect to NATS at %s: %w", redact(url), err)
	}
	b.Conn = nc
	if b.JS, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4000), jetstream.WithPublishAsyncTimeout(30*time.Second)); err != nil {
		b.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if b.Stream, err = EnsureStream(ctx, b.JS, cfg.MaxAge); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// EnsureStream creates or updates Jejak's stream.
func EnsureStream(ctx context.Context, js jetstream.JetStream, maxAge time.Duration) (jetstream.Stream, error) {
	if maxAge <= 0 {
		maxAge = 7 * 24 * time.Hour
	}
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        StreamName,
		Description: "Jejak domain events from the transactional outbox",
		Subjects:    []string{SubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      maxAge,
		Duplicates:  DuplicateWindow,
	})
	if err != nil {
		return nil, fmt.Errorf("create or update stream %s: %w", StreamName, err)
	}
	return s, nil
}

// ClientURL is the embedded server's address ("" when using NATS_URL).
func (b *Bus) ClientURL() string {
	if b.server == nil {
		return ""
	}
	return b.server.ClientURL()
}

// Close drains the connection and stops the embedded server.
func (b *Bus) Close() {
	if b.Conn != nil {
		_ = b.Conn.Drain()
		b.Conn.Close()
	}
	if b.server != nil {
		b.server.Shutdown()
		b.server.WaitForShutdown()
	}
}

// Subject is the subject of an event of tenant slug with the given type.
func Subject(tenantSlug, eventType string) string {
	return SubjectPrefix + "." + tenantSlug + "." + eventType
}

func redact(url string) string {
	if i := strings.Index(url, "@"); i >= 0 {
		if j := strings.Index(url, "://"); j >= 0 && j < i {
			return url[:j+3] + "…" + url[i:]
		}
	}
	return url
}
