// Package testdb gives each test its own migrated PostgreSQL database.
//
// Migrations run once into a template database named by a hash of
// db/schema; each test gets a clone (CREATE DATABASE ... TEMPLATE) in a
// fraction of a second. The server is
// JEJAK_TEST_DATABASE_URL when set, else the suite's own cluster in the
// system's temporary folder (built from the machine's PostgreSQL binaries,
// started on first use and shared by all test binaries), else, on a
// machine without those binaries, the PostgreSQL on 127.0.0.1:5432.
// A failing test's database is kept and its URL logged; a passing test's is
// dropped in the background (trash.go).
package testdb

import (
	"context"
	"crypto/rand"
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
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver the migrations use

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
	s := server(t)
	tpl, name := s.clone(t, migrator{version: version})
	t.Cleanup(func() {
		if !t.Failed() {
			s.discard(t, name)
		}
	})
	dbURL := s.url(testRole, testRole, name)
	t.Logf("testdb: %s", dbURL)
	ctx := context.Background()
	logins, err := s.logins(ctx, tpl, dbURL)
	if err != nil {
		t.Fatalf("testdb: login roles: %v", err)
	}
	app, err := database.OpenExplicit(ctx, s.loginURL(logins, database.AppRole, name), database.AppRole, 16)
	if err != nil {
		t.Fatalf("testdb: open app pool: %v", err)
	}
	system, err := database.OpenExplicit(ctx, s.loginURL(logins, database.SystemRole, name), database.SystemRole, 16)
	if err != nil {
		t.Fatalf("testdb: open system pool: %v", err)
	}
	admin, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatalf("testdb: open admin pool: %v", err)
	}
	t.Cleanup(func() { app.Close(); system.Close(); admin.Close() })
	return &DB{App: app, System: system, Admin: admin, URL: dbURL}
}

// testRole owns the tests' databases and is the user of DB.URL. It is a
// superuser: migrations create roles and switch to jejak_owner, as the
// production migration user (a superuser) does.
const testRole = "jejak_test"

// srv is the server the tests' databases live on.
type srv struct {
	base *url.URL // a superuser's URL of its maintenance database
	// pool holds this binary's few superuser sessions, which clone, mark
	// and drop every test's database. A new session costs 17-24 ms of CPU
	// on these machines (fork, page faults, catalog caches), and opening
	// one per step was four of the ten or so sessions each test cost.
	pool      *pgxpool.Pool
	templates sync.Map // template name -> *templateOnce
	loginsMu  sync.Mutex
	loginsOf  map[string]logins // template name -> its clones' login roles
}

// logins are the user and password, in the clones of one template, of the
// login role database.Open derives for each group role.
type logins map[string]*url.Userinfo

// loginURL is the URL of group's login role in database name.
func (s *srv) loginURL(l logins, group, name string) string {
	pw, _ := l[group].Password()
	return s.url(l[group].Username(), pw, name)
}

// logins returns the login roles of template tpl's clones, derived once
// from dbURL, a clone's. Deriving them (database.LoginURL) opens three
// sessions, each 17-24 ms of the server's CPU here; the clones of one
// template share its secret and so the roles' passwords, and the roles are
// the server's.
func (s *srv) logins(ctx context.Context, tpl, dbURL string) (logins, error) {
	s.loginsMu.Lock()
	defer s.loginsMu.Unlock()
	if l, ok := s.loginsOf[tpl]; ok {
		return l, nil
	}
	l := logins{}
	for _, group := range []string{database.AppRole, database.SystemRole} {
		raw, err := database.LoginURL(ctx, dbURL, group)
		if err != nil {
			return nil, err
		}
		u, err := url.Parse(raw)
		if err != nil {
			return nil, err
		}
		l[group] = u.User
	}
	if s.loginsOf == nil {
		s.loginsOf = map[string]logins{}
	}
	s.loginsOf[tpl] = l
	return l, nil
}

type templateOnce struct {
	once sync.Once
	err  error
}

var (
	serverOnce sync.Once
	theServer  *srv
	serverErr  error
)

func server(t testing.TB) *srv {
	serverOnce.Do(func() { theServer, serverErr = findServer() })
	if serverErr != nil {
		t.Fatalf("testdb: no PostgreSQL for tests: %v", serverErr)
	}
	return theServer
}

// url is the URL of database on the server as user.
func (s *srv) url(user, password, database string) string {
	u := *s.base
	u.User = url.UserPassword(user, password)
	u.Path = "/" + database
	return u.String()
}

// clone creates a database for one test from the template of m, which it
// makes first if no binary has, and returns the template's name and the
// clone's.
func (s *srv) clone(t testing.TB, m migrator) (string, string) {
	t.Helper()
	ctx := context.Background()
	tpl, err := s.template(ctx, m)
	if err != nil {
		t.Fatalf("testdb: template: %v", err)
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	name := tpl + "_inst_" + hex.EncodeToString(id[:])
	if _, err := s.pool.Exec(ctx, "CREATE DATABASE "+ident(name)+" WITH TEMPLATE "+ident(tpl)+" OWNER "+testRole); err != nil {
		t.Fatalf("testdb: clone %s: %v", tpl, err)
	}
	return tpl, name
}

// template returns the name of m's template database, migrated once per
// schema and shared by every binary and run on the server.
func (s *srv) template(ctx context.Context, m migrator) (string, error) {
	h, err := m.Hash()
	if err != nil {
		return "", err
	}
	name := "testdb_tpl_" + h
	v, _ := s.templates.LoadOrStore(name, &templateOnce{})
	o := v.(*templateOnce)
	o.once.Do(func() { o.err = s.ensureTemplate(ctx, name, m) })
	return name, o.err
}

// ensureTemplate makes the template name unless it is there. Binaries that
// start together take turns through an advisory lock; a template is marked
// as one only once migrated, so one left half-made (its binary died) is
// dropped and made again.
func (s *srv) ensureTemplate(ctx context.Context, name string, m migrator) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	if _, err := c.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", name); err != nil {
		return err
	}
	defer c.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtext($1))", name) //nolint:errcheck // the session ends with the binary at worst
	var ready bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1 AND datistemplate)", name).Scan(&ready); err != nil || ready {
		return err
	}
	for _, q := range []string{
		"DROP DATABASE IF EXISTS " + ident(name),
		`DO $$ BEGIN CREATE ROLE ` + testRole + ` LOGIN SUPERUSER PASSWORD '` + testRole + `';
		   EXCEPTION WHEN duplicate_object THEN NULL; END $$`,
		"CREATE DATABASE " + ident(name) + " OWNER " + testRole,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			return fmt.Errorf("make template %s: %w", name, err)
		}
	}
	db, err := sql.Open("pgx", s.url(testRole, testRole, name))
	if err != nil {
		return err
	}
	defer db.Close()
	if err := m.Migrate(ctx, db); err != nil {
		return fmt.Errorf("migrate template %s: %w", name, err)
	}
	_, err = c.Exec(ctx, "ALTER DATABASE "+ident(name)+" IS_TEMPLATE true")
	return err
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

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

func findServer() (*srv, error) {
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
			return nil, fmt.Errorf("start the suite's cluster: %w", err)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", raw, err)
	}
	if u.RawQuery == "" {
		u.RawQuery = "sslmode=disable"
	}
	conf, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, err
	}
	conf.MaxConns = 6 // two drops at a time, and clones beside them
	pool, err := pgxpool.NewWithConfig(ctx, conf)
	if err != nil {
		return nil, err
	}
	return &srv{base: u, pool: pool}, nil
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

func (m migrator) Migrate(ctx context.Context, db *sql.DB) error {
	return database.MigrateDBTo(ctx, db, m.version)
}

// ServerURL is the superuser URL of the server the tests' databases live
// on, for a test that creates databases of its own.
func ServerURL(t testing.TB) string {
	t.Helper()
	return server(t).base.String()
}
