package alert

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/queries"
)

// store is the only file of the package that touches sqlc's types.
type store struct{ q *queries.Queries }

var _ Reader = store{}

func newStore(db database.Querier) store { return store{q: queries.New(db)} }

func (s store) now(ctx context.Context, clk *time.Time) (time.Time, error) {
	t, err := s.q.AlertNow(ctx, clk)
	return t.UTC(), err
}

const principalWatermark = "principal_rollup"

// rollPrincipals adds enqueues recorded since the watermark to the
// per-principal minutes. It stops 5 seconds short of now: an enqueue's
// created_at is taken before its transaction commits, so the newest rows
// may still be invisible; the short lag lets most of them land first.
func (s store) rollPrincipals(ctx context.Context, now time.Time) error {
	upto := now.Add(-5 * time.Second)
	from, err := s.q.AlertWatermarkGet(ctx, principalWatermark)
	if errors.Is(err, pgx.ErrNoRows) {
		from = upto.Add(-baselineWindow - window)
	} else if err != nil {
		return err
	}
	if !upto.After(from) {
		return nil
	}
	if _, err := s.q.AlertPrincipalRollup(ctx, queries.AlertPrincipalRollupParams{FromAt: from, Upto: upto}); err != nil {
		return err
	}
	return s.q.AlertWatermarkSet(ctx, queries.AlertWatermarkSetParams{Name: principalWatermark, Upto: upto})
}

func (s store) states(ctx context.Context) (map[string]Status, error) {
	rows, err := s.q.AlertStateList(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]Status{}
	for _, r := range rows {
		out[r.Rule] = Status{State: r.State, Since: r.Since.UTC(), Value: r.Value, Summary: r.Summary, EvaluatedAt: r.EvaluatedAt.UTC()}
	}
	return out, nil
}

func (s store) saveState(ctx context.Context, rule string, st Status) error {
	return s.q.AlertStateUpsert(ctx, queries.AlertStateUpsertParams{Rule: rule, State: st.State, Since: st.Since,
		Value: st.Value, Summary: st.Summary, EvaluatedAt: st.EvaluatedAt})
}

func (s store) addEvent(ctx context.Context, t Transition) (int64, error) {
	return s.q.AlertEventInsert(ctx, queries.AlertEventInsertParams{Rule: t.Rule, State: t.State, Value: t.Value,
		Summary: t.Summary, At: t.At})
}

func (s store) events(ctx context.Context, limit int) ([]Transition, error) {
	rows, err := s.q.AlertEventsRecent(ctx, int32(limit))
	if err != nil {
		return nil, err
	}
	out := make([]Transition, len(rows))
	for i, r := range rows {
		out[i] = Transition{ID: r.ID, Rule: r.Rule, State: r.State, Value: r.Value, Summary: r.Summary, At: r.At.UTC(),
			Notice: Notice{Sent: r.OutboxID != nil, OutboxState: r.OutboxState, DeliveryState: r.DeliveryState,
				Attempts: int(r.DeliveryAttempts), LastStatus: int(r.DeliveryStatus), LastError: r.DeliveryError}}
	}
	return out, nil
}

func (s store) setEventOutbox(ctx context.Context, eventID, outboxID int64) error {
	return s.q.AlertEventSetOutbox(ctx, queries.AlertEventSetOutboxParams{ID: eventID, OutboxID: &outboxID})
}

// Retention of what the evaluator keeps.
const (
	rollupRetention  = baselineWindow + 2*window
	historyRetention = 90 * 24 * time.Hour
	traceRetention   = 90 * 24 * time.Hour
)

func (s store) prune(ctx context.Context, now time.Time) error {
	if err := s.q.AlertPruneRollups(ctx, now.Add(-rollupRetention)); err != nil {
		return err
	}
	if _, err := s.q.AlertPruneEvents(ctx, now.Add(-historyRetention)); err != nil {
		return err
	}
	if _, err := s.q.TraceJobTracesPrune(ctx, queries.TraceJobTracesPruneParams{Now: &now, OlderThanSeconds: traceRetention.Seconds()}); err != nil {
		return err
	}
	_, err := s.q.TraceOutboxPrune(ctx, queries.TraceOutboxPruneParams{Now: &now, OlderThanSeconds: traceRetention.Seconds()})
	return err
}

func (s store) DeadSince(ctx context.Context, since time.Time) (int64, error) {
	return s.q.AlertDeadSince(ctx, since)
}

func (s store) FinishedSince(ctx context.Context, since time.Time) (int64, error) {
	return s.q.AlertFinishedSince(ctx, since)
}

func (s store) DueWaiting(ctx context.Context, now time.Time, limit int) (int64, error) {
	return s.q.AlertDueWaiting(ctx, queries.AlertDueWaitingParams{Now: &now, Cap: int32(limit)})
}

func (s store) ExpiredSince(ctx context.Context, since time.Time) (int64, error) {
	return s.q.AlertExpiredSince(ctx, since)
}

func (s store) PrincipalWindows(ctx context.Context, recentSince, baseSince time.Time, minRecent int64) ([]PrincipalWindow, error) {
	rows, err := s.q.AlertPrincipalWindows(ctx, queries.AlertPrincipalWindowsParams{RecentSince: recentSince, BaseSince: baseSince, MinRecent: minRecent})
	if err != nil {
		return nil, err
	}
	out := make([]PrincipalWindow, len(rows))
	for i, r := range rows {
		out[i] = PrincipalWindow{TenantID: r.TenantID, Principal: r.Principal, Recent: r.Recent, Baseline: r.Baseline}
	}
	return out, nil
}

func (s store) MissingActorSince(ctx context.Context, since time.Time) (int64, error) {
	return s.q.AlertMissingActorSince(ctx, since)
}

func (s store) AutoPausedKinds(ctx context.Context) ([]string, error) {
	return s.q.AlertAutoPausedKinds(ctx)
}

func (s store) WorkersSince(ctx context.Context, since time.Time) ([]WorkerWindow, error) {
	rows, err := s.q.AlertWorkersSince(ctx, since)
	if err != nil {
		return nil, err
	}
	out := make([]WorkerWindow, len(rows))
	for i, r := range rows {
		out[i] = WorkerWindow{WorkerID: r.WorkerID, Attempts: r.Attempts, Failures: r.Failures}
	}
	return out, nil
}

func (s store) addWorker(ctx context.Context, worker string, at time.Time, attempts, failures int64) error {
	return s.q.AlertWorkerAdd(ctx, queries.AlertWorkerAddParams{WorkerID: worker, At: at, Attempts: attempts, Failures: failures})
}
