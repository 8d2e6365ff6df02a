package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

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
