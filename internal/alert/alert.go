// Package alert evaluates Jejak's alert rules in process, on the job
// engine's maintenance leader (one replica at a time), and keeps each
// rule's state and every transition (pending → firing → resolved) in the
// database for /admin/alerts and /admin. A rule has a threshold and a "for"
// duration, like a Prometheus alerting rule: its condition must hold for
// that long before it fires. deploy/prometheus/jejak-rules.yml has the same
// rules in PromQL for operators who run Prometheus.
package alert

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/webhook"
)

// States a rule can be in, and the states transitions record.
const (
	StateOK       = "ok"
	StatePending  = "pending"
	StateFiring   = "firing"
	StateResolved = "resolved" // recorded on a transition back to ok
)

// Rule is one alert rule. Eval measures the current value; the rule's
// condition is value > Threshold.
type Rule struct {
	Name        string // snake_case, stable: stored and exported as a label
	Title       string
	Description string        // what the value measures
	Runbook     string        // what to do when it fires
	Threshold   float64       // fires when value > Threshold ...
	For         time.Duration // ... continuously for this long (0 = at once)
	Eval        func(ctx context.Context, q Reader, now time.Time) (value float64, summary string, err error)
}

// Status is a rule's current state.
type Status struct {
	Rule        Rule
	State       string
	Since       time.Time
	Value       float64
	Summary     string
	EvaluatedAt time.Time
}

// Transition is one recorded change of state.
type Transition struct {
	ID      int64
	Rule    string
	From    string // ok, pending or firing: the state left
	State   string // pending, firing, resolved
	Value   float64
	Summary string
	At      time.Time
	// Threshold is the rule's, at the time of the transition.
	Threshold float64
	// StartedAt is when the rule entered the state it leaves (At for a
	// rule leaving ok). Set on new transitions, not read back from history.
	StartedAt time.Time
	// Notice is what became of the staff-webhook notification (history
	// only).
	Notice Notice
}

// Notice is the staff-webhook notification of a transition, as far as it
// got: written to the outbox, published, delivered or not.
type Notice struct {
	Sent          bool   // an outbox message was written (a staff webhook was configured)
	OutboxState   string // pending, processing, failed, delivered; "" once pruned
	DeliveryState string // pending, succeeded, failed; "" before the fan-out
	Attempts      int
	LastStatus    int // last HTTP status; 0 = none
	LastError     string
}

// Config configures an Evaluator.
type Config struct {
	Pool   *pgxpool.Pool // system pool
	Clock  clock.Clock   // nil = the database's clock
	Rules  []Rule        // nil = DefaultRules(Sources{})
	Logger *slog.Logger
	// OnTransition is called for every transition inside the transaction
	// that records it (so a notification written there, e.g. an outbox
	// message to a staff webhook, commits with it). nil = none.
	OnTransition func(ctx context.Context, tx pgx.Tx, t Transition) error
	// Observe reports transitions to metrics; nil = none.
	Observe func(rule, state string)
	// Firing reports after every evaluation whether each rule fires (the
	// jejak_alerts_firing gauge), and false for all when this replica stops
	// leading, so a former leader does not keep exporting a stale alert.
	Firing func(rule string, firing bool)
}

// Evaluator runs the rules.
type Evaluator struct {
	cfg Config
}

// New returns an Evaluator; it does nothing until Run or EvaluateOnce.
func New(cfg Config) *Evaluator {
	if cfg.Clock == nil {
		cfg.Clock = clock.Database{}
	}
	if cfg.Rules == nil {
		cfg.Rules = DefaultRules(Sources{})
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Evaluator{cfg: cfg}
}

// Rules returns the evaluator's rules.
func (ev *Evaluator) Rules() []Rule { return ev.cfg.Rules }

// Run evaluates every interval while isLeader reports this replica leads
// maintenance (the job engine's advisory-lock election), until ctx ends.
func (ev *Evaluator) Run(ctx context.Context, every time.Duration, isLeader func() bool) {
	t := time.NewTicker(every)
	defer t.Stop()
	led := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !isLeader() {
			if led && ev.cfg.Firing != nil {
				for _, r := range ev.cfg.Rules {
					ev.cfg.Firing(r.Name, false)
				}
			}
			led = false
			continue
		}
		led = true
		if _, err := ev.EvaluateOnce(ctx); err != nil && ctx.Err() == nil {
			ev.cfg.Logger.Error("evaluate alert rules", "err", err)
		}
	}
}

// EvaluateOnce brings the rollups up to date, evaluates every rule and
// records the transitions, returning them.
func (ev *Evaluator) EvaluateOnce(ctx context.Context) ([]Transition, error) {
	var out []Transition
	firing := map[string]bool{}
	err := pgx.BeginFunc(ctx, ev.cfg.Pool, func(tx pgx.Tx) error {
		st := newStore(tx)
		now, err := st.now(ctx, ev.cfg.Clock.Now())
		if err != nil {
			return err
		}
		if err := st.rollPrincipals(ctx, now); err != nil {
			return err
		}
		prev, err := st.states(ctx)
		if err != nil {
			return err
		}
		for _, r := range ev.cfg.Rules {
			value, summary, err := r.Eval(ctx, st, now)
			if err != nil {
				return fmt.Errorf("rule %s: %w", r.Name, err)
			}
			cur, ok := prev[r.Name]
			if !ok {
				cur = Status{State: StateOK, Since: now}
			}
			next, recorded := step(r, cur, value > r.Threshold, now)
			firing[r.Name] = next.State == StateFiring
			next.Value, next.Summary, next.EvaluatedAt = value, summary, now
			if err := st.saveState(ctx, r.Name, next); err != nil {
				return err
			}
			from, started := cur.State, cur.Since
			if from == StateOK {
				started = now
			}
			for _, state := range recorded {
				t := Transition{Rule: r.Name, From: from, State: state, Value: value, Summary: summary, At: now,
					Threshold: r.Threshold, StartedAt: started}
				from, started = state, now
				if t.ID, err = st.addEvent(ctx, t); err != nil {
					return err
				}
				if ev.cfg.OnTransition != nil {
					if err := ev.cfg.OnTransition(ctx, tx, t); err != nil {
						return fmt.Errorf("notify %s %s: %w", r.Name, state, err)
					}
				}
				out = append(out, t)
			}
		}
		// Rollups and history are bounded; the trace index outlives job
		// retention (so pruned jobs still show on the incident page) but
		// not forever.
		return st.prune(ctx, now)
	})
	if err != nil {
		return nil, fmt.Errorf("evaluate alerts: %w", err)
	}
	for _, t := range out {
		level := slog.LevelInfo
		if t.State == StateFiring {
			level = slog.LevelWarn
		}
		ev.cfg.Logger.Log(ctx, level, "alert "+t.State, "rule", t.Rule, "value", t.Value, "summary", t.Summary)
		if ev.cfg.Observe != nil {
			ev.cfg.Observe(t.Rule, t.State)
		}
	}
	if ev.cfg.Firing != nil {
		for rule, f := range firing {
			ev.cfg.Firing(rule, f)
		}
	}
	return out, nil
}

// step is the state machine: ok → pending when the condition starts to
// hold (→ firing at once when For is 0), pending → firing once it has held
// for For, and back to ok (recorded as resolved) when it stops.
func step(r Rule, cur Status, cond bool, now time.Time) (Status, []string) {
	next := cur
	var rec []string
	switch {
	case cond && cur.State == StateOK:
		next.State, next.Since = StatePending, now
		rec = append(rec, StatePending)
		if r.For <= 0 {
			next.State = StateFiring
			rec = append(rec, StateFiring)
		}
	case cond && cur.State == StatePending && !now.Before(cur.Since.Add(r.For)):
		next.State, next.Since = StateFiring, now
		rec = append(rec, StateFiring)
	case !cond && cur.State != StateOK:
		next.State, next.Since = StateOK, now
		rec = append(rec, StateResolved)
	}
	return next, rec
}

// Service reads alert state for the dashboard.
type Service struct {
	pool  *pgxpool.Pool
	rules []Rule
	// secretFromEnv: staff gave the staff webhook's secret themselves, so
	// the page does not repeat it.
	secretFromEnv bool
	// sealer opens the staff webhook's sealed secret.
	sealer *webhook.Sealer
}

// OpenSecretsWith gives the service the key that opens the staff webhook's
// sealed signing secret.
func (s *Service) OpenSecretsWith(sealer *webhook.Sealer) *Service {
	s.sealer = sealer
	return s
}

// SecretFromEnv tells the service that the staff webhook's signing secret
// came from the environment: staff know it, so the page does not show it.
// A generated secret is shown, since staff have no other way to learn it.
func (s *Service) SecretFromEnv(fromEnv bool) *Service {
	s.secretFromEnv = fromEnv
	return s
}

// NewService returns a reader over the system pool; rules give the stored
// states their titles and runbooks.
func NewService(system *pgxpool.Pool, rules []Rule) *Service {
	if rules == nil {
		rules = DefaultRules(Sources{})
	}
	return &Service{pool: system, rules: rules}
}

// Overview is every rule's status and the latest transitions.
type Overview struct {
	Rules   []Status // in rule order; never-evaluated rules read ok
	History []Transition
	// Webhook is the staff webhook and its latest delivery; nil when none
	// was ever configured.
	Webhook *StaffWebhook
}

// StaffWebhook is the staff endpoint alert transitions go to.
type StaffWebhook struct {
	URL            string
	Enabled        bool
	DisabledReason string
	// Secret is the generated signing secret; "" when staff set it in the
	// environment (they know it).
	Secret string
	// Last is the latest delivery; nil when none yet.
	Last *webhook.Delivery
}

// Firing returns the rules firing now.
func (o *Overview) Firing() []Status {
	var out []Status
	for _, s := range o.Rules {
		if s.State == StateFiring {
			out = append(out, s)
		}
	}
	return out
}

// Firing reads the rules firing now: the staff pages' banner, in one
// statement and no transaction of its own (every staff page and its htmx
// polls show it).
func (s *Service) Firing(ctx context.Context) ([]Status, error) {
	var out []Status
	err := s.FiringRead(ctx, &out)(s.pool)
	return out, err
}

// FiringRead is Firing as one read on a system-pool Querier (for
// database.ReadAll): it stores the rules firing now in out.
func (s *Service) FiringRead(ctx context.Context, out *[]Status) database.Read {
	return func(db database.Querier) error {
		states, err := newStore(db).states(ctx)
		if err != nil {
			return fmt.Errorf("alert states: %w", err)
		}
		o := Overview{Rules: s.statuses(states)}
		*out = o.Firing()
		return nil
	}
}

// statuses is every rule with its state (OK when it has none yet).
func (s *Service) statuses(states map[string]Status) []Status {
	out := make([]Status, len(s.rules))
	for i, r := range s.rules {
		cur, ok := states[r.Name]
		if !ok {
			cur = Status{State: StateOK}
		}
		cur.Rule = r
		out[i] = cur
	}
	return out
}

// Overview reads the current statuses, the last historyLimit transitions
// and the staff webhook.
func (s *Service) Overview(ctx context.Context, historyLimit int) (*Overview, error) {
	o := &Overview{}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		st := newStore(tx)
		states, err := st.states(ctx)
		if err != nil {
			return err
		}
		o.Rules = s.statuses(states)
		if o.History, err = st.events(ctx, historyLimit); err != nil {
			return err
		}
		wh, ok, err := webhook.SystemEndpointStatus(ctx, tx, s.sealer)
		if err != nil || !ok {
			return err
		}
		o.Webhook = &StaffWebhook{URL: wh.Endpoint.URL, Enabled: wh.Endpoint.Enabled,
			DisabledReason: wh.Endpoint.DisabledReason, Last: wh.Last}
		if !s.secretFromEnv {
			o.Webhook.Secret = wh.Secret
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("alert overview: %w", err)
	}
	return o, nil
}
