package signin

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestSessionCommitIsAsynchronousAndDeleteIsNot: a session write turns
// synchronous_commit off for its transaction; a sign-out leaves it on.
func TestSessionCommitIsAsynchronousAndDeleteIsNot(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		op   func(*store) error
		want string
	}{
		{"commit", func(s *store) error { return s.sessionCommit(ctx, "tok", []byte("d"), time.Now().Add(time.Hour)) }, "off"}, //nolint:forbidigo // session expiry is wall time
		{"delete", func(s *store) error { return s.sessionDelete(ctx, "tok") }, "on"},
	} {
		var setting string
		err := database.InTx(ctx, db.App, func(tx pgx.Tx) error {
			if err := c.op(newStore(tx)); err != nil {
				return err
			}
			return tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting)
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if setting != c.want {
			t.Errorf("session %s: synchronous_commit %q in its transaction, want %s", c.name, setting, c.want)
		}
	}
}
