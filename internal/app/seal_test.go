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

// TestAReplicaWithAnotherLogKeyRefusesToSign: once a database's logs are
// signed, a replica whose anchor directory holds another key neither
// serves nor seals, and says which key file to bring; the replica with
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
	size := func() int64 {
		t.Helper()
		var n int64
		if err := db.Admin.QueryRow(ctx, "SELECT coalesce((SELECT size FROM audit_trees WHERE tenant_id = $1), 0)", tenant).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	first, second := config(t.TempDir()), config(t.TempDir())

	// No checkpoint yet: any key may sign the first.
	insertUnsealed(t, db, tenant, 1)
	if err := AuditAnchor(ctx, first, quiet, io.Discard); err != nil {
		t.Fatalf("anchor with the first key: %v", err)
	}
	insertUnsealed(t, db, tenant, 1)
	err := AuditAnchor(ctx, second, quiet, io.Discard)
	if !errors.Is(err, audit.ErrForeignKey) || !strings.Contains(err.Error(), anchor.KeyFile) {
		t.Fatalf("anchor with another key: %v, want audit.ErrForeignKey naming %s", err, anchor.KeyFile)
	}
	if n := size(); n != 1 {
		t.Errorf("after the refused anchor the tree has %d leaves, want 1 (nothing sealed)", n)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := Serve(sctx, second, quiet, io.Discard); !errors.Is(err, audit.ErrForeignKey) {
		t.Fatalf("serve with another key: %v, want audit.ErrForeignKey", err)
	}
	if err := AuditAnchor(ctx, first, quiet, io.Discard); err != nil {
		t.Fatalf("anchor with the signing key again: %v", err)
	}
	if n := size(); n != 2 {
		t.Errorf("the signing key's replica sealed the tree to %d leaves, want 2", n)
	}
}
