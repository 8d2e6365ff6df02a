package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
)

func staffUser(t *testing.T, db *testdb.DB) int64 {
	t.Helper()
	var id int64
	err := db.Admin.QueryRow(context.Background(),
		`INSERT INTO users (email, name, password_hash, staff_role) VALUES ('ops@jejak.test', 'Ops', 'x', 'support') RETURNING id`).Scan(&id)
	if err != nil {
		t.Fatalf("insert staff user: %v", err)
	}
	return id
}

func deadJob(t *testing.T, db *testdb.DB, e *job.Engine, tenant int64) int64 {
	t.Helper()
	enq := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "k", Payload: json.RawMessage(`{}`)})
	js, err := e.Claim(context.Background(), "w", 10)
	if err != nil || len(js) != 1 {
		t.Fatalf("claim: %d %v", len(js), err)
	}
	if _, err := e.Fail(context.Background(), "w", js[0].ID, job.Policy(errors.New("approval revoked"))); err != nil {
		t.Fatalf("fail: %v", err)
	}
	return enq.ID
}

// TestActOnDeadConcurrentRetriesApplyOnce: operators retrying the same
// dead letter at once change it once and record one event.
func TestActOnDeadConcurrentRetriesApplyOnce(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenants := newTenants(t, db, 2)
	e := newEngine(t, db, job.Config{})
	staff := staffUser(t, db)
	id := deadJob(t, db, e, tenants[0])

	var ok, notDead atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := e.ActOnDead(context.Background(), job.Operator{UserID: staff}, job.ActionRetry, id, fmt.Sprintf("operator %d", i))
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, job.ErrNotDead):
				notDead.Add(1)
			default:
				t.Errorf("retry: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || notDead.Load() != 5 {
		t.Fatalf("ok=%d notDead=%d, want 1 and 5", ok.Load(), notDead.Load())
	}
	p, err := audit.Timeline(context.Background(), db.System, tenants[0], audit.Filter{Action: "job.replayed"}, 0, 10)
	if err != nil || len(p.Rows) != 1 || p.Rows[0].ActorKind != audit.ActorStaff {
		t.Fatalf("replay events: %+v %v", p.Rows, err)
	}
	other, _ := audit.Timeline(context.Background(), db.System, tenants[1], audit.Filter{}, 0, 10)
	if len(other.Rows) != 0 {
		t.Fatalf("other tenant's trail has %d events", len(other.Rows))
	}
	r, err := e.Get(context.Background(), id)
	if err != nil || r.State != job.StatePending || r.Flagged || len(r.Errors) != 1 || r.MaxAttempts != r.Attempt+job.DefaultMaxAttempts {
		t.Fatalf("after retry: %+v %v", r, err)
	}
}

func TestActOnDeadRefusals(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenants := newTenants(t, db, 1)
	e := newEngine(t, db, job.Config{})
	staff := staffUser(t, db)
	id := deadJob(t, db, e, tenants[0])
	ctx := context.Background()
	cases := []struct {
		name   string
		op     job.Operator
		action job.OperatorAction
		id     int64
		reason string
		want   error
	}{
		{"blank reason", job.Operator{UserID: staff}, job.ActionRetry, id, "  \n ", job.ErrReasonRequired},
		{"long reason", job.Operator{UserID: staff}, job.ActionDiscard, id, fmt.Sprintf("%0501d", 0), job.ErrReasonTooLong},
		{"no operator", job.Operator{}, job.ActionRetry, id, "why", job.ErrInvalidJob},
		{"unknown action", job.Operator{UserID: staff}, "explode", id, "why", job.ErrInvalidJob},
		{"unknown job", job.Operator{UserID: staff}, job.ActionRetry, id + 100, "why", job.ErrNotFound},
	}
	for _, tc := range cases {
		if err := e.ActOnDead(ctx, tc.op, tc.action, tc.id, tc.reason); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if r, _ := e.Get(ctx, id); r.State != job.StateDead {
		t.Fatalf("refusals changed the job: %s", r.State)
	}
}

// TestStatsRollupAndOverview: recorded attempts land in their minute and
// the overview's totals, series and live counts agree with what happened.
func TestStatsRollupAndOverview(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenants := newTenants(t, db, 2)
	clk := clock.NewFrozen(time.Date(2026, 11, 30, 8, 0, 30, 0, time.UTC))
	e := newEngine(t, db, job.Config{Clock: clk})
	ctx := context.Background()
	// Four jobs run: two succeed and one dies at 08:00, one fails (and
	// will retry) at 08:02; three more stay pending, due since 08:00:30.
	for i := 0; i < 4; i++ {
		enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenants[i%2], Kind: "k", Payload: json.RawMessage(`{}`)})
	}
	js, err := e.Claim(ctx, "w", 10)
	if err != nil || len(js) != 4 {
		t.Fatalf("claim: %d %v", len(js), err)
	}
	for i := 0; i < 3; i++ {
		enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenants[i%2], Kind: "k", Payload: json.RawMessage(`{}`)})
	}
	byTenant := map[int64][]*job.Job{}
	for _, j := range js {
		byTenant[j.TenantID] = append(byTenant[j.TenantID], j)
	}
	for _, j := range byTenant[tenants[0]] {
		if err := e.Complete(ctx, "w", j.ID); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := e.Fail(ctx, "w", byTenant[tenants[1]][0].ID, job.Permanent(errors.New("bad"))); err != nil || st != job.StateDead {
		t.Fatalf("fail: %s %v", st, err)
	}
	clk.Advance(2 * time.Minute)
	if st, err := e.Fail(ctx, "w", byTenant[tenants[1]][1].ID, errors.New("timeout")); err != nil || st != job.StatePending {
		t.Fatalf("fail: %s %v", st, err)
	}
	o, err := e.Overview(ctx)
	if err != nil {
		t.Fatalf("overview: %v", err)
	}
	if o.Totals.Pending != 4 || o.Totals.Succeeded != 2 || o.Totals.Failed != 2 || o.Totals.Died != 1 || len(o.Minutes) != 60 {
		t.Fatalf("totals %+v, %d minutes", o.Totals, len(o.Minutes))
	}
	last, earlier := o.Minutes[59], o.Minutes[57]
	if last.Failed != 1 || earlier.Succeeded != 2 || earlier.Dead != 1 || !last.Minute.Equal(time.Date(2026, 11, 30, 8, 2, 0, 0, time.UTC)) {
		t.Fatalf("series: last %+v, two minutes earlier %+v", last, earlier)
	}
	if o.OldestDue == nil || o.Lag() != 2*time.Minute {
		t.Fatalf("lag %v", o.Lag())
	}
	// Rows of 08:00 (two tenants) are older than a minute at 08:02:30.
	if n, err := job.StatsPrune(ctx, db.System, clk.Now(), time.Minute); err != nil || n != 2 {
		t.Fatalf("prune: %d %v", n, err)
	}
}

// TestStatsCacheSharesOneLoad: concurrent viewers of a stale cache cause
// one load; a fresh snapshot is served without loading.
func TestStatsCacheSharesOneLoad(t *testing.T) {
	t.Parallel()
	var loads atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	c := job.NewStatsCache(func(context.Context) (*job.Overview, error) {
		loads.Add(1)
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		return &job.Overview{}, nil
	}, time.Hour)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := c.Get(context.Background()); err != nil {
				t.Errorf("get: %v", err)
			}
		}()
	}
	// Let the first load finish once it has started; the other callers
	// either wait for it or arrive after it and find a fresh snapshot.
	<-started
	close(release)
	wg.Wait()
	if _, _, err := c.Get(context.Background()); err != nil || loads.Load() != 1 {
		t.Fatalf("loads = %d (%v), want 1", loads.Load(), err)
	}
	always := job.NewStatsCache(func(context.Context) (*job.Overview, error) {
		loads.Add(1)
		return &job.Overview{}, nil
	}, -1)
	_, _, _ = always.Get(context.Background())
	_, _, _ = always.Get(context.Background())
	if loads.Load() != 3 {
		t.Fatalf("negative max age: loads = %d, want 3", loads.Load())
	}
}
