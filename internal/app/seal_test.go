package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/anchor"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// TestWebOnlyReplicaSeals: a replica serving the dashboard without
// workers (JEJAK_WORKERS=0) still seals, so a deployment of web replicas
// alone does not leave its sign-ins and owner actions unsealed.
func TestWebOnlyReplicaSeals(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := insertTenant(t, db, "melati", "Melati")
	insertUnsealed(t, db, tenant, 1)
	serveUntilCleanup(t, map[string]string{"DATABASE_URL": db.URL, "JEJAK_ADDR": freeAddr(t),
		"JEJAK_WORKERS": "0", "JEJAK_DB_CONNS": "4", "JEJAK_DATA_DIR": t.TempDir()})
	testwait.For(t, "the web-only replica to seal the event", func() bool {
		var size int64
		if err := db.Admin.QueryRow(ctx, "SELECT coalesce((SELECT size FROM audit_trees WHERE tenant_id = $1), 0)", tenant).Scan(&size); err != nil {
			t.Fatal(err)
		}
		return size == 1
	})
}

// insertUnsealed records n events of tenant as a writer would, waiting
// for the sealer (inserted by a superuser).
func insertUnsealed(t *testing.T, db *testdb.DB, tenant int64, n int) {
	t.Helper()
	if _, err := db.Admin.Exec(context.Background(), `INSERT INTO audit_unsealed (tenant_id, actor_kind, action, entity, entity_id, detail, trace_id, occurred_at)
		SELECT $1, 'system', 'project.create', 'project', g::text, '{"name": "Katalog Musim Hujan"}', 'trace', now()
		  FROM generate_series(1, $2::int) g`, tenant, n); err != nil {
		t.Fatal(err)
	}
}

// insertTenant adds a tenant as a superuser and returns its id.
func insertTenant(t *testing.T, db *testdb.DB, slug, name string) int64 {
	t.Helper()
	var id int64
	if err := db.Admin.QueryRow(context.Background(), "INSERT INTO tenants (slug, name) VALUES ($1, $2) RETURNING id", slug, name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestAReplicaWithAnotherLogKeyRefusesToSign: the first replica to start
// claims the database's log key; a replica whose anchor directory holds
// another key then neither serves nor seals, and says which key file to
// bring, whether checkpoints exist yet or not, and on a database signed
// before keys were claimed the newest checkpoint decides; the replica with
// the signing key goes on sealing.
func TestAReplicaWithAnotherLogKeyRefusesToSign(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := insertTenant(t, db, "melati", "Melati")
	config := func(dataDir string) Config {
		t.Helper()
		env := map[string]string{"DATABASE_URL": db.URL, "JEJAK_ADDR": freeAddr(t), "JEJAK_WORKERS": "0",
			"JEJAK_DB_CONNS": "4", "JEJAK_DATA_DIR": dataDir}
		cfg, err := FromEnv(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	count := func(sql string, args ...any) int64 {
		t.Helper()
		var n int64
		if err := db.Admin.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	size := func() int64 {
		t.Helper()
		return count("SELECT coalesce((SELECT size FROM audit_trees WHERE tenant_id = $1), 0)", tenant)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, audit.ErrForeignKey) || !strings.Contains(err.Error(), anchor.KeyFile) {
			t.Fatalf("%s with another key: %v, want audit.ErrForeignKey naming %s", what, err, anchor.KeyFile)
		}
	}
	first, second := config(t.TempDir()), config(t.TempDir())

	// The first start claims the key before anything is signed.
	if err := AuditAnchor(ctx, first, quiet, io.Discard); err != nil {
		t.Fatalf("anchor with the first key: %v", err)
	}
	if n := count("SELECT count(*) FROM audit_checkpoints"); n != 0 {
		t.Fatalf("%d checkpoints with nothing to seal", n)
	}
	refused("anchor before any checkpoint", AuditAnchor(ctx, second, quiet, io.Discard))

	insertUnsealed(t, db, tenant, 1)
	if err := AuditAnchor(ctx, first, quiet, io.Discard); err != nil {
		t.Fatalf("anchor with the first key: %v", err)
	}
	insertUnsealed(t, db, tenant, 1)
	refused("anchor", AuditAnchor(ctx, second, quiet, io.Discard))
	if n := size(); n != 1 {
		t.Errorf("after the refused anchor the tree has %d leaves, want 1 (nothing sealed)", n)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := Serve(sctx, second, quiet, io.Discard); !errors.Is(err, audit.ErrForeignKey) {
		t.Fatalf("serve with another key: %v, want audit.ErrForeignKey", err)
	}

	// A database signed before keys were claimed: its newest checkpoint
	// decides, and the refused replica claims nothing.
	if _, err := db.Admin.Exec(ctx, "DELETE FROM audit_log_key"); err != nil {
		t.Fatal(err)
	}
	refused("anchor on a database signed before the claim", AuditAnchor(ctx, second, quiet, io.Discard))
	if n := count("SELECT count(*) FROM audit_log_key"); n != 0 {
		t.Errorf("the refused replica claimed the key (%d rows)", n)
	}
	if err := AuditAnchor(ctx, first, quiet, io.Discard); err != nil {
		t.Fatalf("anchor with the signing key again: %v", err)
	}
	if n := size(); n != 2 {
		t.Errorf("the signing key's replica sealed the tree to %d leaves, want 2", n)
	}
}

// TestTheSealerSealsWhileTheSystemPoolIsTaken: a replica's sealer has a
// pool of its own, so claims, completions and the relay holding every
// system connection do not hold back the seal delay.
func TestTheSealerSealsWhileTheSystemPoolIsTaken(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tenant := insertTenant(t, db, "cempaka", "Cempaka")
	cfg, env := openServing(t, db)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for range env.System.Config().MaxConns {
		c, err := env.System.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
	}
	sealer, err := newSealer(ctx, cfg, env, quiet, nil, nil)
	if err != nil {
		t.Fatalf("start the sealer with the system pool taken: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		sealer.Run(runCtx, 10*time.Millisecond)
	}()
	defer func() { stop(); <-ran }()
	insertUnsealed(t, db, tenant, 3)
	testwait.For(t, "the sealer to seal 3 events with the system pool taken", func() bool {
		var size int64
		if err := db.Admin.QueryRow(ctx, "SELECT coalesce((SELECT size FROM audit_trees WHERE tenant_id = $1), 0)", tenant).Scan(&size); err != nil {
			t.Fatal(err)
		}
		return size == 3
	})
}

// TestTheSealersPoolIsInTheMetrics: the sealer's pool is reported beside
// the tenant and system pools, so an operator sees its waits too.
func TestTheSealersPoolIsInTheMetrics(t *testing.T) {
	t.Parallel()
	_, env := openServing(t, testdb.New(t))
	families, err := NewMetrics(env).Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "jejak_db_pool_max_connections" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pool" {
					sizes[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	if sizes["seal"] != sealConns || sizes["system"] != 4 || sizes["app"] != 4 {
		t.Fatalf("jejak_db_pool_max_connections by pool: %v, want seal %d, system 4, app 4", sizes, sealConns)
	}
}

// openServing opens db as serve does with pools of 4, the sealer's pool
// included, until the test ends.
func openServing(t *testing.T, db *testdb.DB) (Config, *Env) {
	t.Helper()
	vars := map[string]string{"DATABASE_URL": db.URL, "JEJAK_DB_CONNS": "4", "JEJAK_DATA_DIR": t.TempDir()}
	cfg, err := FromEnv(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	env, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	if err := env.openSealPool(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg, env
}
