package job

import (
	"context"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// TestRenewalAndCompletionNeverDeadlock: the heartbeat's renewal and the
// completer's batch update the same held rows from two connections, each
// handed its tokens in whatever order it collected them (the heartbeat
// from a map). Row by row, in opposite orders, they would each hold a row
// the other waits for. A third transaction pins one row so that, without
// a common order, the renewal holds j1 while the completion holds j2 and
// PostgreSQL reports a deadlock.
func TestRenewalAndCompletionNeverDeadlock(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var tenant int64
	if err := db.Admin.QueryRow(ctx, "INSERT INTO tenants (slug, name) VALUES ('locks', 'locks') RETURNING id").Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	ps := make([]EnqueueParams, 3)
	for i := range ps {
		ps[i] = EnqueueParams{TenantID: tenant, Kind: "test.noop", Queue: "default", MaxAttempts: 3, Payload: []byte("{}")}
	}
	if _, err := storeInsert(ctx, db.System, nil, ps); err != nil {
		t.Fatal(err)
	}
	claim, err := storeClaim(ctx, db.System, claimArgs{queue: "default", workerID: "w", batch: 10, lease: time.Minute,
		maxTenants: 10, perTenant: 10, maxShare: 10, tenantConcurrency: 10, fair: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(claim.jobs) != 3 {
		t.Fatalf("claimed %d jobs, want 3", len(claim.jobs))
	}
	tok := map[int64]claimToken{}
	var ids []int64
	for _, j := range claim.jobs {
		tok[j.ID] = claimToken{j.TenantID, j.ID, j.Attempt}
		ids = append(ids, j.ID)
	}
	j1, j2, j3 := tok[min(ids[0], ids[1], ids[2])], tok[max(ids[0], ids[1], ids[2])], claimToken{}
	for _, id := range ids {
		if id != j1.id && id != j2.id {
			j3 = tok[id]
		}
	}

	// The pin: j3 locked until the two statements are both waiting.
	pin, err := db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pin.Rollback(ctx) //nolint:errcheck // committed below on the normal path
	if _, err := pin.Exec(ctx, "SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE", j3.id); err != nil {
		t.Fatal(err)
	}
	waiting := func(n int) func() bool {
		return func() bool {
			var got int
			err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&got)
			if err != nil {
				t.Fatal(err)
			}
			return got >= n
		}
	}
	renewed := make(chan error, 1)
	go func() {
		// Unordered, this locks j1 and then waits for the pin on j3.
		_, err := storeRenew(ctx, db.System, nil, "w", []claimToken{j1, j3, j2}, time.Minute)
		renewed <- err
	}()
	testwait.For(t, "the renewal to wait for the pinned row", waiting(1))
	completed := make(chan error, 1)
	var done []int64
	go func() {
		// Unordered, this locks j2 and then waits for the renewal's j1.
		var err error
		done, err = storeCompleteMany(ctx, db.System, nil, "w", []claimToken{j2, j1})
		completed <- err
	}()
	testwait.For(t, "the completion to wait too", waiting(2))
	if err := pin.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-renewed; err != nil {
		t.Errorf("renewal: %v", err)
	}
	if err := <-completed; err != nil {
		t.Errorf("completion: %v", err)
	}
	if len(done) != 2 {
		t.Errorf("completed %v, want j1 and j2 (%d, %d)", done, j1.id, j2.id)
	}
	var running int
	if err := db.Admin.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE state = 'running'").Scan(&running); err != nil {
		t.Fatal(err)
	}
	if running != 1 {
		t.Errorf("%d jobs running, want 1 (j3)", running)
	}
}
