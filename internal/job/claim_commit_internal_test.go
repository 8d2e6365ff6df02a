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
