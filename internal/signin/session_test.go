package signin_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/signin"
	"github.com/jejakhq/jejak/internal/testdb"
)

// TestSessionCommitSettingStaysInItsTransaction: a session write commits
// asynchronously for its own transaction only. On a one-connection pool
// the session is stored and readable, and the connection still commits
// synchronously afterwards (sign-out and everything else rely on that).
func TestSessionCommitSettingStaysInItsTransaction(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	pool, err := database.Open(ctx, db.URL, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := signin.NewSessionStore(pool, time.Hour)
	for i, data := range [][]byte{[]byte("first"), []byte("second")} {
		if err := s.CommitCtx(ctx, "tok", data, time.Now().Add(time.Hour)); err != nil { //nolint:forbidigo // session expiry is wall time
			t.Fatalf("commit %d: %v", i, err)
		}
		got, found, err := s.FindCtx(ctx, "tok")
		if err != nil || !found || !bytes.Equal(got, data) {
			t.Fatalf("find after commit %d = %q, %v, %v", i, got, found, err)
		}
		var setting string
		if err := pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&setting); err != nil {
			t.Fatal(err)
		}
		if setting != "on" {
			t.Fatalf("after a session commit the connection has synchronous_commit=%s", setting)
		}
	}
	if err := s.DeleteCtx(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	if _, found, err := s.FindCtx(ctx, "tok"); err != nil || found {
		t.Fatalf("find after delete: found %v, %v", found, err)
	}
}
