// Package testdb gives each test its own migrated PostgreSQL database.
//
// Migrations run once into a template database named by a hash of
// db/schema; each test gets a clone in milliseconds (pgtestdb). The server is
// JEJAK_TEST_DATABASE_URL when set, else the suite's own cluster in the
// system's temporary folder (built from the machine's PostgreSQL binaries,
// started on first use and shared by all test binaries), else, on a
// machine without those binaries, the PostgreSQL on 127.0.0.1:5432.
// A failing test's database is kept and its URL logged; a passing test's is
// dropped in the background (trash.go).
package testdb

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver pgtestdb uses
	"github.com/peterldowns/pgtestdb"

	"github.com/jejakhq/jejak/db/schema"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/pgcluster"
)

// DB is one test's database.
type DB struct {
	// App is a pool logged in as jejak_app_login (member of jejak_app
	// only), exactly like the application's.
	App *pgxpool.Pool
	// System is a pool logged in as jejak_system_login, the cross-tenant
	// path.
	System *pgxpool.Pool
	// Admin is a superuser pool for set-up and inspection that must not be
	// limited by row-level security or privileges.
	Admin *pgxpool.Pool
	// URL connects as the superuser test role.
	URL string
}

// New creates a fresh migrated database for t and closes it when t ends.
func New(t testing.TB) *DB {
	t.Helper()
	return NewAt(t, 0)
}

// NewAt is New with the migrations applied only up to version (0: all),
// for tests that load data in an old schema and then migrate it
// (database.Migrate on URL). Its App and System pools are not used by
// NewAt, so they hold no statements prepared against the old schema.
func NewAt(t testing.TB, version int64) *DB {
	t.Helper()
	base := server(t)
	conf := pgtestdb.Custom(&ownCleanup{TB: t}, base, migrator{version: version})
	t.Cleanup(func() {
		if !t.Failed() {
			discard(t, base, conf.Database)
		}
	})
	ctx := context.Background()
	app, err := database.Open(ctx, conf.URL(), 16)
	if err != nil {
		t.Fatalf("testdb: open app pool: %v", err)
	}
	system, err := database.OpenSystem(ctx, conf.URL(), 16)
	if err != nil {
		t.Fatalf("testdb: open system pool: %v", err)
	}
	admin, err := pgxpool.New(ctx, conf.URL())
	if err != nil {
		t.Fatalf("testdb: open admin pool: %v", err)
	}
	t.Cleanup(func() { app.Close(); system.Close(); admin.Close() })
	return &DB{App: app, System: system, Admin: admin, URL: conf.URL()}
}

var (
	serverOnce sync.Once
	serverConf pgtestdb.Config
	serverErr  error
)

func server(t testing.TB) pgtestdb.Config {
	serverOnce.Do(func() { serverConf, serverErr = findServer() })
	if serverErr != nil {
		t.Fatalf("testdb: no PostgreSQL for tests: %v", serverErr)
	}
	return serverConf
}

// suiteSettings configure the suite's own cluster. Its connections are
// the suite's alone: a benchmark or a `make run` on the machine's server
// cannot use them up, and 300 leave room for two packages' tests at four
// at a time, three pools each, and the trash droppers. Nothing in it
// needs to survive the machine crashing, so it skips the flushes that
// only serve that (fsync, full-page images), which every DROP DATABASE's
// forced checkpoint would otherwise wait for. synchronous_commit keeps its
// default: tests check where the code turns it off.
var suiteSettings = []string{"max_connections=300", "fsync=off", "full_page_writes=off"}

// machineServer is the server tests use where no cluster of their own can
// be built.
const machineServer = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

func findServer() (pgtestdb.Config, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw := os.Getenv("JEJAK_TEST_DATABASE_URL")
	if raw == "" {
		// The folder is named by the settings, so a cluster an older
		// checkout started with others is not reused.
		sum := sha256.Sum256([]byte(fmt.Sprint(suiteSettings)))
		dir := filepath.Join(os.TempDir(), "jejak-test-pg-"+hex.EncodeToString(sum[:4]), "data")
		c, err := pgcluster.Start(ctx, dir, "postgres", suiteSettings...)
		switch {
		case err == nil:
			raw = c.URL()
		case errors.Is(err, pgcluster.ErrNoBinaries) && reachable(ctx, machineServer):
			raw = machineServer
		default:
			return pgtestdb.Config{}, fmt.Errorf("start the suite's cluster: %w", err)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return pgtestdb.Config{}, fmt.Errorf("parse %q: %w", raw, err)
	}
	pw, _ := u.User.Password()
	opts := u.RawQuery
	if opts == "" {
		opts = "sslmode=disable"
	}
	return pgtestdb.Config{
		DriverName: "pgx",
		Host:       u.Hostname(),
		Port:       u.Port(),
		User:       u.User.Username(),
		Password:   pw,
		Database:   u.Path[1:],
		Options:    opts,
		// Migrations create roles and switch to jejak_owner, as the
		// production migration user (a superuser) does.
		TestRole:                  &pgtestdb.Role{Username: "jejak_test", Password: "jejak_test", Capabilities: "SUPERUSER"},
		ForceTerminateConnections: true,
	}, nil
}

func reachable(ctx context.Context, raw string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, raw)
	if err != nil {
		return false
	}
	c.Close(ctx)
	return true
}

// migrator applies db/schema with the application's own migration code,
// up to version (0: all).
type migrator struct{ version int64 }

func (m migrator) Hash() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "up to %d\x00", m.version)
	err := fs.WalkDir(schema.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(schema.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:16], err
}

func (m migrator) Migrate(ctx context.Context, db *sql.DB, _ pgtestdb.Config) error {
	return database.MigrateDBTo(ctx, db, m.version)
}

// ServerURL is the superuser URL of the server the tests' databases live
// on, for a test that creates databases of its own.
func ServerURL(t testing.TB) string {
	t.Helper()
	return server(t).URL()
}
