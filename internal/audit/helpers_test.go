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
	db     *testdb.DB
	clk    *clock.Frozen
	rec    *audit.Recorder
	signer *audit.LogSigner
	sealer *audit.Sealer
	vkey   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clk := clock.NewFrozen(time.Date(2026, 2, 2, 9, 0, 0, 0, jakarta))
	f := &fixture{db: testdb.New(t), clk: clk, rec: audit.NewRecorder(clk)}
	f.signer = newSigner(t)
	f.vkey = f.signer.VerifierKey()
	f.sealer = audit.NewSealer(f.db.System, audit.SealerOptions{Signer: f.signer})
	return f
}

func newSigner(t *testing.T) *audit.LogSigner {
	t.Helper()
	s, err := audit.GenerateLogSigner()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// seal seals every waiting event and signs every grown tree.
func (f *fixture) seal(t *testing.T) {
	t.Helper()
	if err := f.sealer.Drain(context.Background()); err != nil {
		t.Fatalf("seal: %v", err)
	}
}

// verify checks a tenant's log (with signatures) through the system pool.
func (f *fixture) verify(t *testing.T, tenantID int64) audit.VerifyResult {
	t.Helper()
	r, err := audit.VerifyWith(context.Background(), f.db.System, tenantID, audit.VerifyOptions{VerifierKey: f.vkey})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return r
}

// tamper runs SQL as the superuser with every user trigger off (what an
// administrator rewriting history would do).
func (f *fixture) tamper(t *testing.T, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	err := database.InTx(ctx, f.db.Admin, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
	if err != nil {
		t.Fatalf("tamper %q: %v", sql, err)
	}
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

// unsealed counts tenantID's events waiting to be sealed.
func (f *fixture) unsealed(t *testing.T, tenantID int64) int {
	t.Helper()
	var n int
	if err := f.db.Admin.QueryRow(context.Background(), `SELECT count(*) FROM audit_unsealed WHERE tenant_id = $1`, tenantID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
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
