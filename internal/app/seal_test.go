package app

import (
	"context"
	"testing"

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
