package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestClaimSkipsLockedRows: a claim must not wait behind a job row that
// another transaction holds locked (FOR UPDATE SKIP LOCKED); it takes the
// other due jobs at once.
func TestClaimSkipsLockedRows(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{})
	ids := enqueueBulk(t, db, e, tenant, "k", 3)
	tx, err := db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	// The head of the queue, locked by someone else (another claimer, an
	// operator's bulk action).
	if _, err := tx.Exec(ctx, "SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", ids[0]); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	got, err := e.Claim(cctx, "w", 3)
	if err != nil {
		t.Fatalf("claim behind a locked row: %v (it waited instead of skipping)", err)
	}
	if len(got) != 2 {
		t.Fatalf("claimed %d jobs, want the 2 unlocked ones", len(got))
	}
	for _, j := range got {
		if j.ID == ids[0] {
			t.Fatal("claimed the row another transaction holds")
		}
	}
}

// TestJobStateCheckRefusesUnknownStates: the database itself refuses a
// state outside the lifecycle, whoever writes it.
func TestJobStateCheckRefusesUnknownStates(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{})
	id := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "k", Payload: json.RawMessage(`{}`)}).ID
	for _, state := range []string{"exploded", "PENDING", ""} {
		_, err := db.Admin.Exec(ctx, "UPDATE jobs SET state = $1 WHERE id = $2", state, id)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
			t.Errorf("state %q: err %v, want a check violation (23514)", state, err)
		}
	}
}

// TestTenantRoleCannotRewriteJobs: through the tenant pool a job's payload,
// hash and run state cannot be rewritten nor the row deleted; the one
// change allowed is cancelling a pending job (what the enqueuing
// transaction of a dependent does).
func TestTenantRoleCannotRewriteJobs(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{})
	id := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "k", Payload: json.RawMessage(`{"amount":1}`)}).ID
	for _, sql := range []string{
		`UPDATE jobs SET payload = '{"amount": 1000000}' WHERE id = $1`,
		`UPDATE jobs SET payload_hash = sha256('x') WHERE id = $1`,
		`UPDATE jobs SET state = 'running', worker_id = 'me', lease_expires_at = now() WHERE id = $1`,
		`UPDATE jobs SET max_attempts = 100 WHERE id = $1`,
		`DELETE FROM jobs WHERE id = $1`,
	} {
		err := database.InTenantTx(ctx, db.App, tenant, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, sql, id)
			return err
		})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s: err %v, want insufficient_privilege", sql, err)
		}
	}
	err := database.InTenantTx(ctx, db.App, tenant, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE id = $1 AND state = 'pending'`, id)
		return err
	})
	if err != nil {
		t.Fatalf("cancelling a pending job as the tenant: %v", err)
	}
}
