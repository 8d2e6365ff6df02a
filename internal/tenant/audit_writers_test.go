package tenant_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/console"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestMultiTenantAuditWritersNeverWait: recording a failed sign-in in
// each of a user's tenants and a bulk operator batch over dead letters of
// the same tenants both write audit events in several tenants at once.
// While a third transaction holds an uncommitted event of the middle
// tenant, both finish (recording shares no row or lock with other
// writers); once everything commits and is sealed, every tenant's log
// holds every event and verifies.
func TestMultiTenantAuditWritersNeverWait(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var member, staff int64
	tenants := make([]int64, 3)
	for i, slug := range []string{"c", "b", "a"} {
		if err := db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id", slug).Scan(&tenants[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Admin.QueryRow(ctx, "INSERT INTO users (email, name, password_hash) VALUES ('m@example.com', 'M', 'x') RETURNING id").Scan(&member); err != nil {
		t.Fatal(err)
	}
	if err := db.Admin.QueryRow(ctx, "INSERT INTO users (email, name, password_hash, staff_role) VALUES ('s@example.com', 'S', 'x', 'admin') RETURNING id").Scan(&staff); err != nil {
		t.Fatal(err)
	}
	e, err := job.New(job.Config{Pool: db.System, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	rec := audit.NewRecorder(nil)
	var ps []job.EnqueueParams
	for _, tid := range tenants {
		if _, err := db.Admin.Exec(ctx, "INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'member')", tid, member); err != nil {
			t.Fatal(err)
		}
		// Every tenant has a head already (its first event).
		if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error {
			_, err := rec.Record(ctx, tx, audit.Event{TenantID: tid, ActorKind: audit.ActorSystem, Action: "test.start", Entity: "test", EntityID: "1"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, job.EnqueueParams{TenantID: tid, Kind: "k", Payload: json.RawMessage(`{}`)})
	}
	if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error {
		_, err := e.EnqueueMany(ctx, tx, ps)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	claimed, err := e.Claim(ctx, "w", len(ps))
	if err != nil || len(claimed) != len(ps) {
		t.Fatalf("claim %d: %v", len(claimed), err)
	}
	for _, j := range claimed {
		if _, err := e.Fail(ctx, "w", j.ID, job.Permanent(errors.New("gone"))); err != nil {
			t.Fatal(err)
		}
	}

	blocker, err := db.System.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(ctx) //nolint:errcheck
	if _, err := rec.Record(ctx, blocker, audit.Event{TenantID: tenants[1], ActorKind: audit.ActorSystem, Action: "test.open", Entity: "test", EntityID: "2"}); err != nil {
		t.Fatal(err)
	}
	// A writer that waited for the open transaction would run into this
	// deadline instead of finishing.
	bounded, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	svc := tenant.NewService(db.App, db.System, nil)
	if err := svc.RecordSignIn(bounded, member, false, "192.0.2.1", ""); err != nil {
		t.Fatalf("sign-in recorded beside an open audit writer: %v", err)
	}
	var maxID int64
	for _, j := range claimed {
		maxID = max(maxID, j.ID)
	}
	staffConsole := console.New(console.Config{App: db.App, System: db.System, Kinds: e, Tenants: svc,
		Audit: audit.NewService(db.App, db.System)})
	if _, err := staffConsole.Bulk(bounded, console.Operator{UserID: staff}, console.ActionDiscard, console.DeadQuery{Kind: "k"}, maxID, "clean up"); err != nil {
		t.Fatalf("bulk discard beside an open audit writer: %v", err)
	}
	if err := blocker.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := audit.NewSealer(db.System, audit.SealerOptions{}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for i, tid := range tenants {
		want := int64(3) // its first event, the failed sign-in, the discard
		if i == 1 {
			want++ // and the one committed last
		}
		r, err := audit.Verify(ctx, db.System, tid)
		if err != nil || !r.OK || r.CheckedThrough != want {
			t.Fatalf("log of tenant %d: %+v, %v; want %d events verified", tid, r, err, want)
		}
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
