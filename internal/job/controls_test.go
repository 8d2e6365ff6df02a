package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
)

func jobRow(t *testing.T, db *testdb.DB, id int64) (state string, attempt int, available time.Time, lastErr string) {
	t.Helper()
	var le *string
	if err := db.Admin.QueryRow(context.Background(), `SELECT state, attempt, available_at, last_error FROM jobs WHERE id = $1`, id).
		Scan(&state, &attempt, &available, &le); err != nil {
		t.Fatal(err)
	}
	if le != nil {
		lastErr = *le
	}
	return
}

func work(t *testing.T, e *job.Engine) int {
	t.Helper()
	n, err := e.WorkOnce(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPayloadVersionLeftForReplicaThatKnowsIt: a v2 job on a replica that
// reads only v1 is delayed (attempt given back), never dead; a replica
// that reads v2 runs it; enqueue stamps the kind's declared version.
func TestPayloadVersionLeftForReplicaThatKnowsIt(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenants(t, db, 1)[0]
	clk := clock.NewFrozen(time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC))
	ran := 0
	newV2 := newEngine(t, db, job.Config{Clock: clk, WorkerID: "new"})
	newV2.Register("report.v", func(context.Context, *job.Job) error { ran++; return nil }, job.KindOptions{PayloadVersion: 2, MinPayloadVersion: 2})
	old := newEngine(t, db, job.Config{Clock: clk, WorkerID: "old"})
	old.Register("report.v", func(context.Context, *job.Job) error { ran++; return nil }, job.KindOptions{})

	v2 := enqueueTenant(t, db, newV2, job.EnqueueParams{TenantID: tenant, Kind: "report.v", Payload: json.RawMessage(`{"shape":2}`)}).ID
	v1 := enqueueTenant(t, db, old, job.EnqueueParams{TenantID: tenant, Kind: "report.v", Payload: json.RawMessage(`{"shape":1}`)}).ID
	var ver int
	if err := db.Admin.QueryRow(context.Background(), `SELECT payload_version FROM jobs WHERE id = $1`, v2).Scan(&ver); err != nil || ver != 2 {
		t.Fatalf("enqueue stamped version %d (%v)", ver, err)
	}
	work(t, old) // runs v1, leaves v2
	if st, attempt, avail, _ := jobRow(t, db, v2); st != "pending" || attempt != 0 || !avail.Equal(clk.Now().Add(job.VersionRetry)) {
		t.Fatalf("v2 on an old replica: %s attempt %d available %s", st, attempt, avail)
	}
	if st, _, _, _ := jobRow(t, db, v1); st != "succeeded" {
		t.Fatalf("v1 on the old replica: %s", st)
	}
	clk.Advance(2 * job.VersionRetry)
	work(t, newV2)
	if st, attempt, _, _ := jobRow(t, db, v2); st != "succeeded" || attempt != 1 || ran != 2 {
		t.Fatalf("v2 on a new replica: %s attempt %d ran %d", st, attempt, ran)
	}
}

// TestDependencyRunsAfterSuccessAndCancelsOnDeath: a job enqueued after
// another in the same transaction waits for it; when it succeeds the
// dependent runs; when it dies the dependent is cancelled with a reason.
func TestDependencyRunsAfterSuccessAndCancelsOnDeath(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{WorkerID: "deps"})
	var order []string
	e.Register("step", func(_ context.Context, j *job.Job) error {
		var p struct{ Name string }
		_ = json.Unmarshal(j.Payload, &p)
		order = append(order, p.Name)
		if strings.HasPrefix(p.Name, "bad") {
			return job.Permanent(errors.New("broken"))
		}
		return nil
	}, job.KindOptions{})
	first := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "step", Payload: json.RawMessage(`{"name":"first"}`), Priority: 5}).ID
	second := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "step", Payload: json.RawMessage(`{"name":"second"}`), DependsOn: &first}).ID
	work(t, e) // only first is due, although second has a better priority
	if len(order) != 1 || order[0] != "first" {
		t.Fatalf("ran %v", order)
	}
	work(t, e)
	if len(order) != 2 || order[1] != "second" {
		t.Fatalf("dependent did not run after its prerequisite: %v", order)
	}
	waitsFor, dependents, err := job.Dependencies(context.Background(), db.System, tenant, first)
	if err != nil || waitsFor != nil || len(dependents) != 1 || dependents[0].ID != second {
		t.Fatalf("links of %d: %v %v %v", first, waitsFor, dependents, err)
	}
	if w, _, _ := job.Dependencies(context.Background(), db.System, tenant, second); w == nil || *w != first {
		t.Fatalf("second waits for %v", w)
	}

	bad := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "step", Payload: json.RawMessage(`{"name":"bad"}`)}).ID
	after := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "step", Payload: json.RawMessage(`{"name":"after-bad"}`), DependsOn: &bad}).ID
	work(t, e)
	work(t, e)
	st, _, _, reason := jobRow(t, db, after)
	if st != "cancelled" || !strings.Contains(reason, "dead") {
		t.Fatalf("dependent of a dead job: %s %q", st, reason)
	}
	// Enqueued after its prerequisite already died: cancelled at once.
	late := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "step", Payload: json.RawMessage(`{"name":"late"}`), DependsOn: &bad}).ID
	if st, _, _, _ := jobRow(t, db, late); st != "cancelled" {
		t.Fatalf("late dependent: %s", st)
	}
	// A dependency in another tenant is refused (as if it did not exist).
	var other int64
	if err := db.Admin.QueryRow(context.Background(), `INSERT INTO tenants (slug, name) VALUES ('other', 'Other') RETURNING id`).Scan(&other); err != nil {
		t.Fatal(err)
	}
	err = database.InTenantTx(context.Background(), db.App, other, func(tx pgx.Tx) error {
		_, err := e.Enqueue(context.Background(), tx, job.EnqueueParams{TenantID: other, Kind: "step", Payload: json.RawMessage(`{}`), DependsOn: &first})
		return err
	})
	if !errors.Is(err, job.ErrDependency) {
		t.Fatalf("cross-tenant dependency: %v", err)
	}
	for _, o := range order {
		if o == "after-bad" || o == "late" {
			t.Fatalf("a cancelled dependent ran: %v", order)
		}
	}
}

// TestPauseKindAndQueue: paused kinds and queues are not claimed; resume
// lets them run; reasons are required and every change is logged.
func TestPauseKindAndQueue(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{WorkerID: "pause", Queues: []string{"default", "bulk"}})
	e.Register("a", func(context.Context, *job.Job) error { return nil }, job.KindOptions{})
	e.Register("b", func(context.Context, *job.Job) error { return nil }, job.KindOptions{})
	ctx := context.Background()
	staff := int64(0)
	if err := db.Admin.QueryRow(ctx, `INSERT INTO users (email, name, password_hash, staff_role) VALUES ('s@x.test', 'S', 'x', 'support') RETURNING id`).Scan(&staff); err != nil {
		t.Fatal(err)
	}
	if err := e.Pause(ctx, job.PauseKind, "a", " ", staff); err == nil {
		t.Fatal("pause without a reason accepted")
	}
	if err := e.Pause(ctx, job.PauseKind, "a", "retry storm on a", staff); err != nil {
		t.Fatal(err)
	}
	if err := e.Pause(ctx, job.PauseQueue, "bulk", "maintenance", staff); err != nil {
		t.Fatal(err)
	}
	a := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "a", Payload: json.RawMessage(`{}`)}).ID
	b := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "b", Payload: json.RawMessage(`{}`)}).ID
	bulk := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "b", Queue: "bulk", Payload: json.RawMessage(`{}`)}).ID
	work(t, e)
	for id, want := range map[int64]string{a: "pending", b: "succeeded", bulk: "pending"} {
		if st, _, _, _ := jobRow(t, db, id); st != want {
			t.Fatalf("job %d is %s, want %s", id, st, want)
		}
	}
	if err := e.Resume(ctx, job.PauseKind, "a", "fixed", staff); err != nil {
		t.Fatal(err)
	}
	if err := e.Resume(ctx, job.PauseQueue, "bulk", "done", staff); err != nil {
		t.Fatal(err)
	}
	work(t, e)
	for _, id := range []int64{a, bulk} {
		if st, _, _, _ := jobRow(t, db, id); st != "succeeded" {
			t.Fatalf("job %d after resume: %s", id, st)
		}
	}
	var logged int
	if err := db.Admin.QueryRow(ctx, `SELECT count(*) FROM job_pause_log WHERE actor_id = $1`, staff).Scan(&logged); err != nil || logged != 4 {
		t.Fatalf("pause log rows: %d %v", logged, err)
	}
}

// TestFailureRateAutoPause: a kind failing above the threshold over the
// window pauses itself (logged as automatic, alert hook told); a healthy
// kind keeps running.
func TestFailureRateAutoPause(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenants(t, db, 1)[0]
	e := newEngine(t, db, job.Config{WorkerID: "guard", Backoff: func(int) time.Duration { return 0 }})
	e.Register("flaky", func(context.Context, *job.Job) error { return errors.New("upstream 503") }, job.KindOptions{MaxAttempts: 1})
	e.Register("fine", func(context.Context, *job.Job) error { return nil }, job.KindOptions{})
	for i := 0; i < 25; i++ {
		enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "flaky", Payload: json.RawMessage(`{}`)})
		enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "fine", Payload: json.RawMessage(`{}`)})
	}
	work(t, e)
	var alerted []string
	paused, err := e.CheckFailureRates(context.Background(), job.FailureGuard{OnPause: func(kind string, _ float64, _ int64) { alerted = append(alerted, kind) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(paused) != 1 || paused[0] != "flaky" || len(alerted) != 1 {
		t.Fatalf("paused %v alerted %v", paused, alerted)
	}
	ps, err := e.Pauses(context.Background())
	if err != nil || len(ps) != 1 || !ps[0].Auto || !strings.Contains(ps[0].Reason, "automatic") {
		t.Fatalf("pauses %+v %v", ps, err)
	}
	again, _ := e.CheckFailureRates(context.Background(), job.FailureGuard{})
	if len(again) != 0 {
		t.Fatalf("paused twice: %v", again)
	}
	flaky := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "flaky", Payload: json.RawMessage(`{}`)}).ID
	work(t, e)
	if st, _, _, _ := jobRow(t, db, flaky); st != "pending" {
		t.Fatalf("auto-paused kind was claimed: %s", st)
	}
}

// TestSensitiveRescueIsInTheTrail: a sensitive job whose worker vanished
// is rescued after its lease, and the trail says so before it runs again.
func TestSensitiveRescueIsInTheTrail(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tenant := newTenants(t, db, 1)[0]
	clk := clock.NewFrozen(time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC))
	e := newEngine(t, db, job.Config{Clock: clk, WorkerID: "lifecycle-worker", LeaseDuration: time.Minute})
	e.Register("user.disable-access", func(context.Context, *job.Job) error { return nil }, job.KindOptions{Sensitive: true})
	id := enqueueTenant(t, db, e, job.EnqueueParams{TenantID: tenant, Kind: "user.disable-access", Payload: json.RawMessage(`{}`)}).ID
	if js, err := e.Claim(context.Background(), "lifecycle-worker", 1); err != nil || len(js) != 1 {
		t.Fatalf("claim: %v %d", err, len(js))
	} // ...and the worker crashes
	clk.Advance(2 * time.Minute)
	if n, err := e.RescueExpired(context.Background()); err != nil || n != 1 {
		t.Fatalf("rescue: %d %v", n, err)
	}
	work(t, e)
	got := strings.Join(stages(t, db, tenant, id), " ")
	if got != "queued rescued claimed started succeeded" {
		t.Fatalf("trail: %s", got)
	}
}
