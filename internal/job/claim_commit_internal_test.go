package job

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestClaimsCommitAsynchronously: each claim statement turns
// synchronous_commit off for the transaction it runs in (there, its own
// implicit one), with or without jobs to claim.
func TestClaimsCommitAsynchronously(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	args := claimArgs{queue: "default", workerID: "w", batch: 10, lease: time.Minute, maxTenants: 10, perTenant: 1, fair: true}
	for name, claim := range map[string]func(pgx.Tx) error{
		"fair":  func(tx pgx.Tx) error { _, err := storeClaim(ctx, tx, args); return err },
		"small": func(tx pgx.Tx) error { _, _, err := storeClaimSmall(ctx, tx, args); return err },
	} {
		var setting string
		err := database.InTx(ctx, db.System, func(tx pgx.Tx) error {
			if err := claim(tx); err != nil {
				return err
			}
			return tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting)
		})
		if err != nil {
			t.Fatalf("%s claim: %v", name, err)
		}
		if setting != "off" {
			t.Errorf("%s claim: synchronous_commit %q in its transaction, want off", name, setting)
		}
	}
}

// TestTheFairClaimRunsItsGenericPlan: the fair claim is planned once per
// connection (its generic plan) rather than for each claim's parameters,
// and the forced plan mode ends with the claim's transaction: the pooled
// connection's next statements choose their plans as before.
func TestTheFairClaimRunsItsGenericPlan(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	conn, err := db.System.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	args := claimArgs{queue: "default", workerID: "w", batch: 10, lease: time.Minute, maxTenants: 10, perTenant: 1, fair: true}
	const claims = 7
	for i := range claims {
		args.afterTenant = int64(i)
		if _, err := storeClaim(ctx, conn, args); err != nil {
			t.Fatal(err)
		}
	}
	var generic, custom int64
	if err := conn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement = $1`, claimAnyKindSQL).Scan(&generic, &custom); err != nil {
		t.Fatalf("the claim's prepared statement: %v", err)
	}
	// Left to choose, PostgreSQL makes custom plans for a statement's
	// first five runs whatever their cost.
	if custom != 0 || generic != claims {
		t.Errorf("%d claims ran %d generic and %d custom plans, want %d generic", claims, generic, custom, claims)
	}
	var mode string
	if err := conn.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "auto" {
		t.Errorf("plan_cache_mode %q on the connection after the claims, want auto", mode)
	}
}
