package job_test

import (
	"context"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
	"github.com/jejakhq/jejak/internal/testwait"
)

// TestClaimsKeepToTheWorkersTenants: each of two workers claims only its
// own tenants' jobs (ids of its residue), fairly between them, whatever the
// other tenants have waiting; once its own have nothing pending it takes
// the others' rather than idle.
func TestClaimsKeepToTheWorkersTenants(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	ten := newTenants(t, db, 4)
	workers := []*job.Engine{newEngine(t, db, job.Config{}), newEngine(t, db, job.Config{})}
	for _, tid := range ten {
		enqueueBulk(t, db, workers[0], tid, "k", 30)
	}
	for rank, e := range workers {
		e.SetSlot(2, rank)
		jobs, err := e.Claim(ctx, "w", 20)
		if err != nil {
			t.Fatal(err)
		}
		per := map[int64]int{}
		for _, j := range jobs {
			if j.TenantID%2 != int64(rank) {
				t.Fatalf("rank %d of 2 claimed a job of tenant %d while its own had work", rank, j.TenantID)
			}
			per[j.TenantID]++
		}
		if len(jobs) != 20 || len(per) != 2 {
			t.Fatalf("rank %d claimed %d jobs of tenants %v, want 20 shared by its two tenants", rank, len(jobs), per)
		}
		for tid, n := range per {
			if n != 10 {
				t.Errorf("rank %d: tenant %d got %d of 20, want half", rank, tid, n)
			}
		}
	}

	// Rank 0 claims on: only its own tenants' jobs while they have any
	// pending, then the others'.
	ownPending := func() int {
		var n int
		if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE state = 'pending' AND tenant_id % 2 = 0`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for claims := 0; ; claims++ {
		if claims == 20 {
			t.Fatal("rank 0 never took another rank's job after 20 claims")
		}
		jobs, err := workers[0].Claim(ctx, "w", 15)
		if err != nil {
			t.Fatal(err)
		}
		foreign := 0
		for _, j := range jobs {
			if j.TenantID%2 != 0 {
				foreign++
			}
		}
		if foreign == 0 {
			continue
		}
		if n := ownPending(); n != 0 {
			t.Fatalf("rank 0 took %d of the other rank's jobs with %d of its own pending", foreign, n)
		}
		break
	}
	if workers[0].Stats().Steals == 0 {
		t.Fatal("no steal counted")
	}
}

// TestWorkersLearnTheirSlotsFromTheirBeats: two engines of one queue
// learn from their heartbeats that they are two, each with its own rank;
// when one stops, the other serves every tenant again.
func TestWorkersLearnTheirSlotsFromTheirBeats(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	cfg := func(id string) job.Config {
		return job.Config{WorkerID: id, Workers: 1, HeartbeatInterval: 20 * time.Millisecond, LeaseDuration: 5 * time.Second}
	}
	a, b := newEngine(t, db, cfg("worker-a")), newEngine(t, db, cfg("worker-b"))
	startEngine(t, a)
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	slots := func(want [2][2]int) func() bool {
		return func() bool {
			am, ar := a.Slot()
			bm, br := b.Slot()
			return [2][2]int{{am, ar}, {bm, br}} == want
		}
	}
	testwait.For(t, "a and b to be ranks 0 and 1 of 2", slots([2][2]int{{2, 0}, {2, 1}}))
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Stop(stop); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "a alone again", func() bool { m, r := a.Slot(); return m == 1 && r == 0 })
}

// A worker that joins or leaves the queue's workers changes every other
// worker's share at once, not at their next heartbeat: until then the old
// workers still took the shares of the old count. The beats here are an
// hour apart, so only the join's and the leave's notifications can move
// a's slot within the wait.
func TestWorkersLearnOfAJoinOrLeaveAtOnce(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	cfg := func(id string) job.Config {
		return job.Config{WorkerID: id, Workers: 1, HeartbeatInterval: time.Hour, LeaseDuration: 2 * time.Hour}
	}
	a, b := newEngine(t, db, cfg("worker-a")), newEngine(t, db, cfg("worker-b"))
	startEngine(t, a)
	if m, r := a.Slot(); m != 1 || r != 0 {
		t.Fatalf("a alone has slot %d/%d, want 1/0", r, m)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m, r := b.Slot(); m != 2 || r != 1 {
		t.Fatalf("b joining a has slot %d/%d, want 1/2", r, m)
	}
	testwait.For(t, "a to count b", func() bool { m, r := a.Slot(); return m == 2 && r == 0 })
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Stop(stop); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "a alone again", func() bool { m, r := a.Slot(); return m == 1 && r == 0 })
}
