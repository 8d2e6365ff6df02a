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

// TestAuditHeadLockOrder: recording a failed sign-in in each of a user's
// tenants (in slug order, here the reverse of tenant_id order) and a bulk
// operator batch over dead letters of the same tenants (in job order, here
// tenant_id order) both lock those tenants' audit heads. A third
// transaction holds the middle head until both are queued: locking in
// their own orders, each then holds one end and waits for the other's — a
// deadlock (40P01). Both lock in tenant_id order, so both finish.
func TestAuditHeadLockOrder(t *testing.T) {
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

	blocker, err := db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(ctx) //nolint:errcheck
	if _, err := blocker.Exec(ctx, "SELECT 1 FROM audit_heads WHERE tenant_id = $1 FOR UPDATE", tenants[1]); err != nil {
		t.Fatal(err)
	}
	waiting := func(n int) func() bool {
		return func() bool {
			var got int
			err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&got)
			return err == nil && got >= n
		}
	}
	svc := tenant.NewService(db.App, db.System, nil)
	errs := make(chan error, 2)
	go func() { errs <- svc.RecordSignIn(ctx, member, false, "192.0.2.1", "") }()
	poll(t, waiting(1))
	var maxID int64
	for _, j := range claimed {
		maxID = max(maxID, j.ID)
	}
	staffConsole := console.New(console.Config{App: db.App, System: db.System, Kinds: e, Tenants: svc,
		Audit: audit.NewService(db.App, db.System)})
	go func() {
		_, err := staffConsole.Bulk(ctx, console.Operator{UserID: staff}, console.ActionDiscard, console.DeadQuery{Kind: "k"}, maxID, "clean up")
		errs <- err
	}()
	poll(t, waiting(2))
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent multi-tenant audit writers: %v", err)
		}
	}
	for _, tid := range tenants {
		r, err := audit.Verify(ctx, db.System, tid)
		if err != nil || !r.OK || r.CheckedThrough != 3 {
			t.Fatalf("chain of tenant %d: %+v, %v; want 3 events verified", tid, r, err)
		}
	}
}

func poll(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the writers to queue on the blocked head")
		}
		time.Sleep(5 * time.Millisecond) //nolint:forbidigo // polling with a deadline
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
