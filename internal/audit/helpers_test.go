package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

var jakarta = time.FixedZone("WIB", 7*3600)

// fixture is a test database with tenants and users made by the superuser.
type fixture struct {
	db  *testdb.DB
	clk *clock.Frozen
	rec *audit.Recorder
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clk := clock.NewFrozen(time.Date(2026, 2, 2, 9, 0, 0, 0, jakarta))
	return &fixture{db: testdb.New(t), clk: clk, rec: audit.NewRecorder(clk)}
}

func (f *fixture) tenant(t *testing.T, slug string) int64 {
	t.Helper()
	var id int64
	err := f.db.Admin.QueryRow(context.Background(),
		`INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id`, slug).Scan(&id)
	if err != nil {
		t.Fatalf("create tenant %s: %v", slug, err)
	}
	return id
}

func (f *fixture) user(t *testing.T, email string, tenantID int64) int64 {
	t.Helper()
	ctx := context.Background()
	var id int64
	err := f.db.Admin.QueryRow(ctx,
		`INSERT INTO users (email, name, password_hash) VALUES ($1, $1, 'x') RETURNING id`, email).Scan(&id)
	if err != nil {
		t.Fatalf("create user %s: %v", email, err)
	}
	if tenantID != 0 {
		if _, err := f.db.Admin.Exec(ctx, `INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'owner')`, tenantID, id); err != nil {
			t.Fatalf("add membership: %v", err)
		}
	}
	return id
}

// record writes one event as jejak_app in its own tenant transaction.
func (f *fixture) record(t *testing.T, e audit.Event) audit.Recorded {
	t.Helper()
	var r audit.Recorded
	err := database.InTenantTx(context.Background(), f.db.App, e.TenantID, func(tx pgx.Tx) (err error) {
		r, err = f.rec.Record(context.Background(), tx, e)
		return err
	})
	if err != nil {
		t.Fatalf("record %s: %v", e.Action, err)
	}
	return r
}

// recordN writes n simple events for a tenant.
func (f *fixture) recordN(t *testing.T, tenantID int64, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		f.clk.Advance(time.Minute)
		f.record(t, audit.Event{
			TenantID: tenantID, ActorKind: audit.ActorSystem, Action: "test.event", Entity: "thing",
			EntityID: fmt.Sprint(i + 1), Detail: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i+1)),
		})
	}
}

func (f *fixture) countAdmin(t *testing.T, tenantID int64) int {
	t.Helper()
	var n int
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT count(*) FROM audit_events WHERE tenant_id = $1`, tenantID).Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

func ptr[T any](v T) *T { return &v }
