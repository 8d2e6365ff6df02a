package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/database"
)

// Config holds the knobs shared by the benchmarks (set from flags).
type Config struct {
	Jobs          int           // burn-down job count
	Workers       int           // worker goroutines, same for both systems
	InsertBatch   int           // jobs per batch insert, same for both systems
	Duration      time.Duration // continuous: measured window
	Warmup        time.Duration // continuous: unmeasured lead-in
	Backlog       int           // continuous: producer keeps about this many jobs queued
	PollInterval  time.Duration // fallback poll interval, same for both systems
	FetchCooldown time.Duration // River's minimum gap between fetches
	ClaimBatch    int           // Jejak claim batch size (0 = Workers, like River's fetch limit)
	Conns         int32         // pool size per system
	Tenants       int           // Jejak tenants the jobs are spread over
	LatencyJobs   int           // latency: jobs enqueued one at a time
	LatencyRate   int           // latency: jobs per second
	Timeout       time.Duration // per-run safety limit

	// Many tenants (tenants.go) and several replicas (replicas.go).
	TenantsBacklog int // tenants continuous: jobs kept queued, at every tenant count
	ReplicaJobs    int // replicas: points.award jobs per run
	ReplicaWorkers int // replicas: JEJAK_WORKERS of each replica
	ReplicaWarmup  int // replicas: unmeasured jobs run first
	ReplicaConns   int // replicas: JEJAK_DB_CONNS of each replica (0: as many as fit)

	// Large-data benchmarks (pages.go).
	ScaleAuditEvents int  // audit events in the scale database
	ScaleJobs        int  // jobs in the scale database
	Requests         int  // timed requests per page benchmark and round
	Reseed           bool // rebuild the scale database even if big enough
	// ScaleDB names the scale database (default jejak_scale), so a copy
	// with schema changes can be measured beside the shared one.
	ScaleDB string
	// ScaleNoMigrate leaves a reused scale database's schema as it is
	// (read-only use of a database another branch seeded).
	ScaleNoMigrate bool
	// HTTPScale runs the http family's server over the scale database
	// (web only: no workers, so the seeded job mix stays as it is)
	// instead of a fresh demo database.
	HTTPScale bool
	// HTTPGzip makes the http family's sessions ask for gzip, as browsers
	// do: the server then compresses every page (its CPU counts it) and the
	// client decompresses it on the same cores.
	HTTPGzip bool
	// HTTPRate paces the http family's sessions to this many requests a
	// second in all (0: each session asks again as soon as answered).
	HTTPRate float64

	// Outbox relay benchmark (outbox.go); zero values take small defaults.
	OutboxMsgs     int           // burn-down: committed messages relayed
	OutboxRate     int           // steady load: messages per second
	OutboxDuration time.Duration // steady load: how long
	// AppendWriters is audit_append's concurrent writers (0 = 64, the
	// figure docs/benchmarks.md reports); the smoke test takes a few, so
	// it fits beside other users of a shared server's connections.
	AppendWriters int
}

// Env is what a benchmark run gets: the server, the shared knobs and helpers
// to make fresh databases.
type Env struct {
	Cfg Config
	// ServerURL is a superuser URL of the benchmark server (database part is
	// replaced per benchmark database).
	ServerURL string
	Log       *slog.Logger
	// DBSuffix is appended to every benchmark database name, so the smoke
	// test never collides with a benchmark running on the same server.
	DBSuffix string

	// tpl is the migrated database this run clones its fresh Jejak
	// databases from (migratedTemplate).
	tpl struct {
		once sync.Once
		name string
		err  error
	}
}

// DBName is the name a benchmark database gets on this run.
func (e *Env) DBName(base string) string { return base + e.DBSuffix }

// DatabaseURL returns ServerURL pointing at database name.
func (e *Env) DatabaseURL(name string) string {
	u, _ := url.Parse(e.ServerURL) // validated in main
	u.Path = "/" + name
	return u.String()
}

// Admin opens a small superuser pool on database name.
func (e *Env) Admin(ctx context.Context, name string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(e.DatabaseURL(name))
	if err != nil {
		return nil, fmt.Errorf("parse admin url: %w", err)
	}
	cfg.MaxConns = 2
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open admin pool on %s: %w", name, err)
	}
	return p, nil
}

// FreshDatabase drops database name (ending any session on it) and creates
// it empty, so every round starts from the same state.
func (e *Env) FreshDatabase(ctx context.Context, name string) error {
	return e.freshDatabase(ctx, name, "")
}

// FreshMigrated is FreshDatabase with Jejak's migrations applied: a clone
// of a database migrated once per run. Migrating took 0.75 s per database
// here and a clone 0.2 s, and the smoke test alone makes about twenty.
func (e *Env) FreshMigrated(ctx context.Context, name string) error {
	tpl, err := e.migratedTemplate(ctx)
	if err != nil {
		return err
	}
	return e.freshDatabase(ctx, name, tpl)
}

// freshDatabase is FreshDatabase as a copy of template ("": empty).
func (e *Env) freshDatabase(ctx context.Context, name, template string) error {
	return e.onServer(ctx, func(c *pgx.Conn) error {
		id := pgx.Identifier{name}.Sanitize()
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		create := "CREATE DATABASE " + id
		if template != "" {
			create += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
		}
		if _, err := c.Exec(ctx, create); err != nil {
			return fmt.Errorf("create database %s: %w", name, err)
		}
		return nil
	})
}

// migratedTemplate creates and migrates this run's template database on
// first use; the end of the run (runAtExit) drops it. It is made afresh
// by every run, so a change to db/schema is always in it, and nothing but
// CREATE DATABASE connects to it after its migration.
func (e *Env) migratedTemplate(ctx context.Context) (string, error) {
	e.tpl.once.Do(func() {
		name := e.DBName("jejak_bench_template")
		if err := e.FreshDatabase(ctx, name); err != nil {
			e.tpl.err = err
			return
		}
		atExit(func() {
			if err := e.DropDatabase(context.Background(), name); err != nil {
				e.Log.Warn("drop the template database", "database", name, "err", err)
			}
		})
		if err := database.Migrate(ctx, e.DatabaseURL(name)); err != nil {
			e.tpl.err = fmt.Errorf("migrate %s: %w", name, err)
			return
		}
		e.tpl.name = name
	})
	return e.tpl.name, e.tpl.err
}

// DropDatabase removes a benchmark database once its round is over.
func (e *Env) DropDatabase(ctx context.Context, name string) error {
	return e.onServer(ctx, func(c *pgx.Conn) error {
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	})
}

// Checkpoint flushes dirty buffers so a run does not pay for the previous
// run's (or its own setup's) writes.
func (e *Env) Checkpoint(ctx context.Context) error {
	return e.onServer(ctx, func(c *pgx.Conn) error {
		if _, err := c.Exec(ctx, "CHECKPOINT"); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		return nil
	})
}

func (e *Env) onServer(ctx context.Context, fn func(*pgx.Conn) error) error {
	c, err := pgx.Connect(ctx, e.ServerURL)
	if err != nil {
		return fmt.Errorf("connect to server: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	return fn(c)
}

// JejakDB is a fresh, migrated Jejak database with tenants.
type JejakDB struct {
	Name    string
	URL     string
	Admin   *pgxpool.Pool // superuser
	System  *pgxpool.Pool // jejak_system, what the engine runs on
	Tenants []int64
}

// Close closes the pools (the database stays until DropDatabase).
func (d *JejakDB) Close() {
	if d.System != nil {
		d.System.Close()
	}
	if d.Admin != nil {
		d.Admin.Close()
	}
}

// NewJejakDB creates database name afresh, applies Jejak's migrations, inserts
// cfg.Tenants tenants as the superuser and opens the jejak_system pool.
// Later benchmarks (audit, pages) can build on it.
func (e *Env) NewJejakDB(ctx context.Context, name string) (*JejakDB, error) {
	return e.newJejakDB(ctx, name, e.Cfg.Tenants)
}

// newJejakDB is NewJejakDB with tenants tenant rows.
func (e *Env) newJejakDB(ctx context.Context, name string, tenants int) (*JejakDB, error) {
	if err := e.FreshMigrated(ctx, name); err != nil {
		return nil, err
	}
	d := &JejakDB{Name: name, URL: e.DatabaseURL(name)}
	var err error
	if d.Admin, err = e.Admin(ctx, name); err != nil {
		return nil, err
	}
	rows, err := d.Admin.Query(ctx, `
		INSERT INTO tenants (slug, name)
		SELECT 'bench-' || g, 'Bench tenant ' || g FROM generate_series(1, $1::int) g
		RETURNING id`, max(tenants, 1))
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("insert tenants: %w", err)
	}
	d.Tenants, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("insert tenants: %w", err)
	}
	if d.System, err = database.OpenSystem(ctx, d.URL, e.Cfg.Conns); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// checkLoopback refuses servers that are not on this machine: the
// benchmark drops and creates databases.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return errors.New("database URL must be a postgres:// URL")
	}
	host := u.Hostname()
	if host == "" || strings.HasPrefix(host, "/") || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing non-loopback database host %q: the benchmark drops and creates databases", host)
}
