package alert_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/alert"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/testdb"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func tenant(t *testing.T, db *testdb.DB, slug string) int64 {
	t.Helper()
	var id int64
	if err := db.Admin.QueryRow(context.Background(), "INSERT INTO tenants (slug, name) VALUES ($1, $1) RETURNING id", slug).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func only(rules []alert.Rule, name string) []alert.Rule {
	for _, r := range rules {
		if r.Name == name {
			return []alert.Rule{r}
		}
	}
	panic("no rule " + name)
}

func states(ts []alert.Transition) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Rule+":"+t.State)
	}
	return out
}

func eval(t *testing.T, ev *alert.Evaluator, want ...string) {
	t.Helper()
	ts, err := ev.EvaluateOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(states(ts)) != fmt.Sprint(want) {
		t.Fatalf("transitions %v, want %v", states(ts), want)
	}
}

// TestDeadLettersAlertLifecycle dead-letters real jobs through the engine
// on a frozen clock and drives the rule through pending (threshold
// crossed), firing (held for its "for" duration) and resolved (the window
// moved past them), with the history, the notification hook and the
// metrics hook seeing each transition once.
func TestDeadLettersAlertLifecycle(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	start := time.Date(2026, 3, 2, 9, 0, 10, 0, time.UTC)
	clk := clock.NewFrozen(start)
	engine, err := job.New(job.Config{Pool: db.System, Clock: clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	tid := tenant(t, db, "alerting")
	var notified, observed []string
	var firingNow bool
	ev := alert.New(alert.Config{Pool: db.System, Clock: clk, Logger: quiet,
		Rules: only(alert.DefaultRules(alert.Sources{}), alert.RuleDeadLetters),
		OnTransition: func(_ context.Context, _ pgx.Tx, tr alert.Transition) error {
			notified = append(notified, tr.State)
			return nil
		},
		Observe: func(rule, state string) { observed = append(observed, state) },
		Firing:  func(rule string, f bool) { firingNow = f },
	})

	eval(t, ev) // nothing dead: stays ok, nothing recorded

	ps := make([]job.EnqueueParams, 3)
	for i := range ps {
		ps[i] = job.EnqueueParams{TenantID: tid, Kind: "test.broken", Payload: json.RawMessage(`{}`)}
	}
	if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error { _, err := engine.EnqueueMany(ctx, tx, ps); return err }); err != nil {
		t.Fatal(err)
	}
	jobs, err := engine.Claim(ctx, "w1", 10)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("claim: %d %v", len(jobs), err)
	}
	for _, j := range jobs {
		if st, err := engine.Fail(ctx, "w1", j.ID, job.Permanent(errors.New("bad"))); err != nil || st != job.StateDead {
			t.Fatalf("fail: %s %v", st, err)
		}
	}

	eval(t, ev, "dead_letters_growing:pending") // 3 > 2: condition holds
	clk.Advance(30 * time.Second)
	eval(t, ev) // held 30s of the 1m: still pending
	clk.Advance(30 * time.Second)
	eval(t, ev, "dead_letters_growing:firing")
	if !firingNow {
		t.Fatal("the firing gauge hook was not told the rule fires")
	}
	clk.Advance(5 * time.Minute)
	eval(t, ev) // still firing: nothing new
	clk.Advance(6 * time.Minute)
	eval(t, ev, "dead_letters_growing:resolved") // the 10-minute window moved past them
	if firingNow {
		t.Fatal("the firing gauge hook still says firing after resolution")
	}

	svc := alert.NewService(db.System, ev.Rules())
	o, err := svc.Overview(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Rules) != 1 || o.Rules[0].State != alert.StateOK || len(o.Firing()) != 0 {
		t.Fatalf("overview rules: %+v", o.Rules)
	}
	var hist []string
	for _, h := range o.History {
		hist = append(hist, h.State)
	}
	if fmt.Sprint(hist) != "[resolved firing pending]" {
		t.Fatalf("history newest first = %v", hist)
	}
	if !o.History[1].At.Equal(start.Add(time.Minute)) || o.History[1].Value != 3 {
		t.Fatalf("firing transition: %+v", o.History[1])
	}
	if fmt.Sprint(notified) != "[pending firing resolved]" || fmt.Sprint(observed) != "[pending firing resolved]" {
		t.Fatalf("hooks saw %v / %v", notified, observed)
	}
}

// TestPrincipalSpikeAlert: one user's burst of enqueues, far above that
// user's own (empty) day, fires after two minutes; another user's ordinary
// activity does not.
func TestPrincipalSpikeAlert(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	clk := clock.NewFrozen(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	engine, err := job.New(job.Config{Pool: db.System, Clock: clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	tid := tenant(t, db, "spiky")
	var uid, quietUID int64
	for i, p := range []*int64{&uid, &quietUID} {
		if err := db.Admin.QueryRow(ctx, "INSERT INTO users (email, name, password_hash) VALUES ($1, 'U', 'x') RETURNING id",
			fmt.Sprintf("u%d@spiky.test", i)).Scan(p); err != nil {
			t.Fatal(err)
		}
	}
	enqueue := func(by int64, n int) {
		ps := make([]job.EnqueueParams, n)
		for i := range ps {
			ps[i] = job.EnqueueParams{TenantID: tid, Kind: "test.x", Payload: json.RawMessage(`{}`), RequestedBy: &by}
		}
		if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error { _, err := engine.EnqueueMany(ctx, tx, ps); return err }); err != nil {
			t.Fatal(err)
		}
	}
	ev := alert.New(alert.Config{Pool: db.System, Clock: clk, Logger: quiet,
		Rules: only(alert.DefaultRules(alert.Sources{}), alert.RulePrincipalSpike)})
	enqueue(quietUID, 20)
	clk.Advance(10 * time.Second) // past the rollup's 5s settling lag
	eval(t, ev)
	enqueue(uid, 150)
	clk.Advance(10 * time.Second)
	eval(t, ev, "principal_enqueue_spike:pending")
	clk.Advance(2 * time.Minute)
	eval(t, ev, "principal_enqueue_spike:firing")
	o, err := alert.NewService(db.System, ev.Rules()).Overview(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if f := o.Firing(); len(f) != 1 || f[0].Value != 150 || f[0].Summary == "" {
		t.Fatalf("firing: %+v", f)
	}
	// The rollup did not count the burst twice across evaluations.
	var n int64
	if err := db.Admin.QueryRow(ctx, "SELECT sum(n) FROM alert_principal_minute WHERE principal = $1", uid).Scan(&n); err != nil || n != 150 {
		t.Fatalf("rolled up %d enqueues (%v), want 150", n, err)
	}
}

// TestWorkerFailingAlert: per-replica tallies flushed to the database;
// the worker failing far more than its peers fires at once when For is 0.
func TestWorkerFailingAlert(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	clk := clock.NewFrozen(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	for _, w := range []struct {
		id     string
		ok, ko int
	}{{"w-good-1", 50, 1}, {"w-good-2", 48, 2}, {"w-bad", 20, 30}} {
		tally := alert.NewWorkerTally(nil)
		for i := 0; i < w.ok; i++ {
			tally.JobFinished("k", job.OutcomeSucceeded, time.Millisecond)
		}
		for i := 0; i < w.ko; i++ {
			tally.JobFinished("k", job.OutcomeRetried, time.Millisecond)
		}
		if err := tally.Flush(ctx, db.System, clk, w.id); err != nil {
			t.Fatal(err)
		}
	}
	rule := only(alert.DefaultRules(alert.Sources{}), alert.RuleWorkerFailing)
	rule[0].For = 0
	ev := alert.New(alert.Config{Pool: db.System, Clock: clk, Logger: quiet, Rules: rule})
	eval(t, ev, "worker_failing:pending", "worker_failing:firing")
	o, err := alert.NewService(db.System, ev.Rules()).Overview(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if f := o.Firing(); len(f) != 1 || !contains(f[0].Summary, "w-bad") {
		t.Fatalf("firing: %+v", f)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestKindAutoPausedAlert: real failures of one kind trip the engine's
// failure-rate guard on a frozen clock; the next evaluation fires
// kind_auto_paused naming the kind, it keeps firing while the kind stays
// paused, and resolves once staff resume it.
func TestKindAutoPausedAlert(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	clk := clock.NewFrozen(time.Date(2026, 3, 2, 9, 0, 10, 0, time.UTC))
	engine, err := job.New(job.Config{Pool: db.System, Clock: clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	tid := tenant(t, db, "guarded")
	var staff int64
	if err := db.Admin.QueryRow(ctx, "INSERT INTO users (email, name, password_hash) VALUES ('ops@example.test', 'Ops', 'x') RETURNING id").Scan(&staff); err != nil {
		t.Fatal(err)
	}
	ev := alert.New(alert.Config{Pool: db.System, Clock: clk, Logger: quiet,
		Rules: only(alert.DefaultRules(alert.Sources{}), alert.RuleKindAutoPaused)})

	// A kind paused by hand is an operator's decision, not an alert.
	if err := engine.Pause(ctx, job.PauseKind, "test.manual", "maintenance window", staff); err != nil {
		t.Fatal(err)
	}
	eval(t, ev)

	ps := make([]job.EnqueueParams, 25)
	for i := range ps {
		ps[i] = job.EnqueueParams{TenantID: tid, Kind: "test.flaky", Payload: json.RawMessage(`{}`)}
	}
	if err := database.InTx(ctx, db.System, func(tx pgx.Tx) error { _, err := engine.EnqueueMany(ctx, tx, ps); return err }); err != nil {
		t.Fatal(err)
	}
	jobs, err := engine.Claim(ctx, "w1", 25)
	if err != nil || len(jobs) != 25 {
		t.Fatalf("claim: %d %v", len(jobs), err)
	}
	for _, j := range jobs {
		if _, err := engine.Fail(ctx, "w1", j.ID, job.Permanent(errors.New("upstream 503"))); err != nil {
			t.Fatal(err)
		}
	}
	eval(t, ev) // failing, but not paused yet: the pause is what alerts
	paused, err := engine.CheckFailureRates(ctx, job.FailureGuard{})
	if err != nil || fmt.Sprint(paused) != "[test.flaky]" {
		t.Fatalf("guard paused %v %v", paused, err)
	}
	eval(t, ev, "kind_auto_paused:pending", "kind_auto_paused:firing")
	clk.Advance(10 * time.Minute)
	eval(t, ev) // still paused: still firing, nothing new

	o, err := alert.NewService(db.System, ev.Rules()).Overview(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if f := o.Firing(); len(f) != 1 || !strings.Contains(f[0].Summary, "test.flaky") || strings.Contains(f[0].Summary, "test.manual") {
		t.Fatalf("firing: %+v", f)
	}

	if err := engine.Resume(ctx, job.PauseKind, "test.flaky", "dependency fixed", staff); err != nil {
		t.Fatal(err)
	}
	eval(t, ev, "kind_auto_paused:resolved")
}
