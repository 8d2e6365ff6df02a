package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/database"
)

// Payload versions, dependencies and pauses.

// delayUnknownVersion is the delay reason of a job whose payload version this
// replica does not read.
const delayUnknownVersion = "payload_version_unknown"

// VersionRetry is how long a job with an unknown payload version waits
// before another replica (or this one, upgraded) tries it.
const VersionRetry = time.Minute

// checkVersion leaves a job whose payload version the registered handler
// does not read to another replica: delayed, never dead, so a rolling
// deploy runs neither new payloads on old code nor old ones on new code.
func checkVersion(o KindOptions, j *Job) error {
	v := j.PayloadVersion
	if v == 0 {
		v = 1
	}
	hi, lo := max(o.PayloadVersion, 1), max(o.MinPayloadVersion, 1)
	if v > hi || v < lo {
		return Delay(VersionRetry, fmt.Sprintf("%s:v%d (this replica reads v%d–v%d)", delayUnknownVersion, v, lo, hi))
	}
	return nil
}

// ErrDependency: the job named in DependsOn does not exist in the tenant.
var ErrDependency = errors.New("dependency job not found in this tenant")

// stampControls writes payload versions above 1 and dependencies of jobs
// just inserted, in the enqueuing transaction. Ordinary enqueues (version
// 1, no dependency) skip it entirely.
func (e *Engine) stampControls(ctx context.Context, tx Querier, ps []EnqueueParams, ids []int64, existing []bool) error {
	for i, p := range ps {
		if existing[i] {
			continue
		}
		version := p.PayloadVersion
		if version <= 0 {
			if o, ok := e.KindOptions(p.Kind); ok {
				version = o.PayloadVersion
			}
		}
		version = max(version, 1)
		if version == 1 && p.DependsOn == nil {
			continue
		}
		wait, cancel := false, ""
		if p.DependsOn != nil {
			st, err := storeLockForDependents(ctx, tx, *p.DependsOn, p.TenantID)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: job %d", ErrDependency, *p.DependsOn)
			}
			if err != nil {
				return fmt.Errorf("lock dependency %d: %w", *p.DependsOn, err)
			}
			switch st {
			case StateSucceeded:
			case StateDead, StateCancelled:
				cancel = fmt.Sprintf("dependency job %d ended %s", *p.DependsOn, st)
			default:
				wait = true
			}
		}
		if err := storeStampControls(ctx, tx, p.TenantID, ids[i], version, p.DependsOn, wait); err != nil {
			return fmt.Errorf("stamp job %d: %w", ids[i], err)
		}
		if cancel != "" {
			if err := storeCancelPending(ctx, tx, p.TenantID, ids[i], cancel, e.clock.Now()); err != nil {
				return fmt.Errorf("cancel job %d: %w", ids[i], err)
			}
			e.observer().JobsCancelled(p.Kind, 1)
		}
	}
	return nil
}

// Link is a job on the other end of a dependency.
type Link struct {
	ID    int64
	Kind  string
	State State
}

// Dependencies returns what job id of tenantID waits for (nil if nothing)
// and the jobs waiting for it, for the dashboard's links both ways.
func Dependencies(ctx context.Context, db Querier, tenantID, id int64) (*int64, []Link, error) {
	waits, deps, err := storeDependencies(ctx, db, tenantID, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, ErrNotFound
	}
	return waits, deps, err
}

// Pause scopes.
const (
	PauseKind  = "kind"
	PauseQueue = "queue"
)

// Pause is a paused kind or queue.
type Pause struct {
	Scope    string
	Name     string
	Reason   string
	PausedBy *int64
	Auto     bool
	PausedAt time.Time
}

// Pause errors.
var (
	ErrPaused    = &apperr.Error{Code: apperr.CodeConflict, Message: "already paused"}
	ErrNotPaused = &apperr.Error{Code: apperr.CodeConflict, Message: "not paused"}
)

// pauseRefresh bounds how stale a replica's view of pauses may be.
const pauseRefresh = time.Second

type pauseCache struct {
	mu     sync.Mutex
	at     time.Time
	kinds  []string
	queues map[string]bool
}

func (e *Engine) loadPauses(ctx context.Context) ([]string, map[string]bool) {
	c := &e.pauses
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < pauseRefresh { //nolint:forbidigo // cache age, not domain time
		return c.kinds, c.queues
	}
	rows, err := storePauses(ctx, e.pool)
	if err != nil {
		if ctx.Err() == nil { // a stopping claim's read is cut short, not failed
			e.log.Error("read paused kinds and queues; keeping the last known", "err", err)
		}
		return c.kinds, c.queues
	}
	c.kinds, c.queues = nil, map[string]bool{}
	for _, r := range rows {
		if r.Scope == PauseKind {
			c.kinds = append(c.kinds, r.Name)
		} else {
			c.queues[r.Name] = true
		}
	}
	c.at = time.Now() //nolint:forbidigo // cache age, not domain time
	return c.kinds, c.queues
}

func (e *Engine) pausedKinds(ctx context.Context) []string {
	k, _ := e.loadPauses(ctx)
	return k
}

func (e *Engine) queuePaused(ctx context.Context, queue string) bool {
	_, q := e.loadPauses(ctx)
	return q[queue]
}

func (e *Engine) forgetPauses() {
	e.pauses.mu.Lock()
	e.pauses.at = time.Time{}
	e.pauses.mu.Unlock()
}

func pausedOrEmpty(k []string) []string {
	if k == nil {
		return []string{}
	}
	return k
}

func checkPause(scope, name, reason string) (string, string, error) {
	if scope != PauseKind && scope != PauseQueue {
		return "", "", apperr.Invalid("scope", "Pause a kind or a queue.")
	}
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 100 || !utf8.ValidString(name) {
		return "", "", apperr.Invalid("name", "Name the kind or queue (at most 100 characters).")
	}
	reason = strings.TrimSpace(reason)
	if reason == "" || utf8.RuneCountInString(reason) > 500 || !utf8.ValidString(reason) || strings.ContainsRune(reason, 0) {
		return "", "", apperr.Invalid("reason", "A reason is required (at most 500 characters).")
	}
	return name, reason, nil
}

// Pause stops claims of a kind or queue until Resume; the reason and the
// operator are logged. Running jobs finish.
func (e *Engine) Pause(ctx context.Context, scope, name, reason string, actorID int64) error {
	name, reason, err := checkPause(scope, name, reason)
	if err != nil {
		return err
	}
	return e.pause(ctx, scope, name, reason, &actorID, false, nil)
}

func (e *Engine) pause(ctx context.Context, scope, name, reason string, actorID *int64, auto bool, detail map[string]any) error {
	err := database.InTx(ctx, e.pool, func(tx pgx.Tx) error {
		now, err := e.now(ctx, tx)
		if err != nil {
			return err
		}
		p := Pause{Scope: scope, Name: name, Reason: reason, PausedBy: actorID, Auto: auto, PausedAt: now}
		ok, err := storePauseInsert(ctx, tx, p)
		if err != nil {
			return err
		}
		if !ok {
			return ErrPaused
		}
		raw, _ := json.Marshal(detail)
		if detail == nil {
			raw = []byte("{}")
		}
		return storePauseLog(ctx, tx, p, "paused", now, raw)
	})
	e.forgetPauses()
	return err
}

// Resume lets a paused kind or queue be claimed again; reason required.
func (e *Engine) Resume(ctx context.Context, scope, name, reason string, actorID int64) error {
	name, reason, err := checkPause(scope, name, reason)
	if err != nil {
		return err
	}
	err = database.InTx(ctx, e.pool, func(tx pgx.Tx) error {
		now, err := e.now(ctx, tx)
		if err != nil {
			return err
		}
		ok, err := storePauseDelete(ctx, tx, scope, name)
		if err != nil {
			return err
		}
		if !ok {
			return ErrNotPaused
		}
		return storePauseLog(ctx, tx, Pause{Scope: scope, Name: name, Reason: reason, PausedBy: &actorID}, "resumed", now, []byte("{}"))
	})
	e.forgetPauses()
	if err == nil {
		_ = storeNotify(ctx, e.pool)
	}
	return err
}

// Pauses lists what is paused.
func (e *Engine) Pauses(ctx context.Context) ([]Pause, error) {
	var out []Pause
	err := e.PausesRead(ctx, &out)(e.pool)
	return out, err
}

// PausesRead is Pauses as one read on a system-pool Querier (for
// database.ReadAll): it stores the pauses in out.
func (e *Engine) PausesRead(ctx context.Context, out *[]Pause) database.Read {
	return func(db database.Querier) (err error) {
		if *out, err = storePauses(ctx, db); err != nil {
			return fmt.Errorf("list pauses: %w", err)
		}
		return nil
	}
}

func (e *Engine) now(ctx context.Context, q Querier) (time.Time, error) {
	if t := e.clock.Now(); t != nil {
		return *t, nil
	}
	var t time.Time
	err := q.QueryRow(ctx, "SELECT now()").Scan(&t)
	return t, err
}

// FailureGuard pauses a kind automatically when its failure rate over
// Window crosses Threshold (with at least MinAttempts attempts, so a
// single failure of a rare kind does not stop it).
type FailureGuard struct {
	Window      time.Duration // 0 = 5 minutes
	Threshold   float64       // 0 = 0.5
	MinAttempts int64         // 0 = 20
	// OnPause is told of each automatic pause (an alert hook); may be nil.
	OnPause func(kind string, rate float64, attempts int64)
}

// CheckFailureRates runs the guard once (the maintenance leader's pass)
// and returns the kinds it paused.
func (e *Engine) CheckFailureRates(ctx context.Context, g FailureGuard) ([]string, error) {
	if g.Window <= 0 {
		g.Window = 5 * time.Minute
	}
	if g.Threshold <= 0 {
		g.Threshold = 0.5
	}
	if g.MinAttempts <= 0 {
		g.MinAttempts = 20
	}
	now, err := e.now(ctx, e.pool)
	if err != nil {
		return nil, err
	}
	rows, err := storeKindRates(ctx, e.pool, now.Add(-g.Window).Truncate(time.Minute))
	if err != nil {
		return nil, fmt.Errorf("read failure rates: %w", err)
	}
	kinds, _ := e.loadPauses(ctx)
	paused := map[string]bool{}
	for _, k := range kinds {
		paused[k] = true
	}
	var out []string
	for _, r := range rows {
		n := r.Succeeded + r.Failed
		if n < g.MinAttempts || paused[r.Kind] {
			continue
		}
		rate := float64(r.Failed) / float64(n)
		if rate < g.Threshold {
			continue
		}
		reason := fmt.Sprintf("automatic: %.0f%% of %d attempts failed in the last %s (threshold %.0f%%)",
			rate*100, n, g.Window, g.Threshold*100)
		err := e.pause(ctx, PauseKind, r.Kind, reason, nil, true, map[string]any{
			"failure_rate": rate, "attempts": n, "failed": r.Failed, "window": g.Window.String(),
		})
		if errors.Is(err, ErrPaused) {
			continue
		}
		if err != nil {
			return out, err
		}
		e.log.Warn("kind paused automatically: failure rate over threshold", "kind", r.Kind, "rate", rate, "attempts", n)
		if g.OnPause != nil {
			g.OnPause(r.Kind, rate, n)
		}
		out = append(out, r.Kind)
	}
	return out, nil
}

// PauseEvent is one pause or resume, from the append-only log.
type PauseEvent struct {
	Scope, Name, Action, Reason string
	ActorID                     *int64
	Auto                        bool
	At                          time.Time
}

// PauseLogRead reads the latest pauses and resumes, newest first, as one
// read on a system-pool Querier (for database.ReadAll): it stores them in
// out.
func (e *Engine) PauseLogRead(ctx context.Context, limit int, out *[]PauseEvent) database.Read {
	return func(db database.Querier) (err error) {
		if *out, err = storePauseLogRecent(ctx, db, limit); err != nil {
			return fmt.Errorf("read pause log: %w", err)
		}
		return nil
	}
}
