package job

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/tracing"
)

// Outcome is how one attempt ended, as metrics count it.
type Outcome string

// Attempt outcomes.
const (
	OutcomeSucceeded Outcome = "succeeded"
	OutcomeRetried   Outcome = "retried"   // failed, will run again after backoff
	OutcomeDead      Outcome = "dead"      // failed for the last time (transient or permanent)
	OutcomeCancelled Outcome = "cancelled" // the job ended cancelled (JobsCancelled), not an attempt
	OutcomeRejected  Outcome = "rejected"  // refused by policy (expired, unauthorised, tampered)
)

// Observer receives the engine's events for metrics. The engine calls it
// synchronously on its hot path, so implementations must be cheap (counter
// increments) and must not block. Labels it receives are bounded: kinds and
// classes, never tenants or job ids.
type Observer interface {
	// JobsEnqueued: n new jobs of kind were written (idempotent duplicates
	// are reported through JobIdempotentSkip instead).
	JobsEnqueued(kind string, n int)
	// JobIdempotentSkip: an enqueue matched an existing idempotency key.
	JobIdempotentSkip(kind string)
	// JobMissingMetadata: a job was enqueued without a request trace
	// ("trace": one was generated) or without a requesting user ("actor").
	JobMissingMetadata(kind, field string)
	// JobStarted: an attempt began, wait after the job was due.
	JobStarted(kind string, wait time.Duration)
	// JobFinished: an attempt ended with outcome after running for run.
	JobFinished(kind string, outcome Outcome, run time.Duration)
	// JobFailed: an attempt failed with class.
	JobFailed(kind string, class Class)
	// JobExpired: a job reached its expiry before it could run.
	JobExpired(kind string)
	// JobsRescued: the leader took back n jobs whose worker lost its lease.
	JobsRescued(n int)
	// JobDelayed: a handler put its job back for later; reason is the
	// delay's short token (e.g. "lock_busy"), never the resource it names.
	JobDelayed(kind, reason string)
	// JobsCancelled: n jobs of kind ended cancelled without an attempt
	// ending: enqueued after the job they depend on had died, or cancelled
	// with it when it died. (Staff discarding dead letters is the console's
	// and reported by it.)
	JobsCancelled(kind string, n int)
}

// NopObserver ignores every event.
type NopObserver struct{}

func (NopObserver) JobsEnqueued(string, int)                   {}
func (NopObserver) JobIdempotentSkip(string)                   {}
func (NopObserver) JobMissingMetadata(string, string)          {}
func (NopObserver) JobStarted(string, time.Duration)           {}
func (NopObserver) JobFinished(string, Outcome, time.Duration) {}
func (NopObserver) JobFailed(string, Class)                    {}
func (NopObserver) JobExpired(string)                          {}
func (NopObserver) JobsRescued(int)                            {}
func (NopObserver) JobDelayed(string, string)                  {}
func (NopObserver) JobsCancelled(string, int)                  {}

// Observer returns the engine's observer (NopObserver when none), so code
// that ends jobs outside the engine (staff discarding dead letters) reports
// to the same metrics.
func (e *Engine) Observer() Observer { return e.observer() }

func (e *Engine) observer() Observer {
	if e.cfg.Observer == nil {
		return NopObserver{}
	}
	return e.cfg.Observer
}

// traceFromContext fills a job's trace id from the enqueuing context (the
// request, or the job whose handler enqueues it) when the caller did not
// give one, so a trace follows the work it causes.
func traceFromContext(ctx context.Context, p *EnqueueParams) {
	if p.TraceID == "" {
		p.TraceID = reqctx.Trace(ctx)
	}
}

// observeEnqueued reports one enqueue call's jobs.
func (e *Engine) observeEnqueued(ps []EnqueueParams, existing []bool) {
	o := e.observer()
	if _, nop := o.(NopObserver); nop {
		return
	}
	per := map[string]int{}
	for i, p := range ps {
		if existing[i] {
			o.JobIdempotentSkip(p.Kind)
			continue
		}
		per[p.Kind]++
		if p.TraceID == "" {
			o.JobMissingMetadata(p.Kind, "trace")
		}
		if p.RequestedBy == nil {
			o.JobMissingMetadata(p.Kind, "actor")
		}
	}
	for k, n := range per {
		o.JobsEnqueued(k, n)
	}
}

// enqueueSpan is the span of one enqueue call (a child of the request's
// span when there is one); a no-op when spans are not exported.
func (e *Engine) enqueueSpan(ctx context.Context, ps []EnqueueParams) tracing.Span {
	if !tracing.Enabled() {
		return tracing.Span{}
	}
	_, s := tracing.Start(ctx, "job.enqueue "+ps[0].Kind, "", attribute.Int("jejak.jobs", len(ps)))
	return s
}

// attemptContext is the context a handler runs in: it carries the job's
// trace (so jobs the handler enqueues inherit it), the identifiers logs
// need, and the attempt's span when spans are exported.
func (e *Engine) attemptContext(ctx context.Context, j *Job) (context.Context, tracing.Span) {
	ctx = reqctx.WithTrace(ctx, j.TraceID)
	ctx = reqctx.WithTenant(ctx, j.TenantID)
	ctx = reqctx.WithJob(ctx, j.ID, j.WorkerID)
	if !j.AttemptedAt.IsZero() {
		e.observer().JobStarted(j.Kind, max(j.AttemptedAt.Sub(j.AvailableAt), 0))
	}
	if !tracing.Enabled() {
		return ctx, tracing.Span{}
	}
	return tracing.Start(ctx, "job.attempt "+j.Kind, "",
		attribute.Int64("jejak.job_id", j.ID), attribute.String("jejak.kind", j.Kind),
		attribute.Int("jejak.attempt", j.Attempt), attribute.String("jejak.worker_id", j.WorkerID),
		attribute.Int64("jejak.tenant_id", j.TenantID))
}

// observeAttempt reports how an attempt ended: err is the handler's
// outcome, st the job's new state after a failure.
func (e *Engine) observeAttempt(j *Job, err error, st State, run time.Duration) {
	o := e.observer()
	if err == nil {
		o.JobFinished(j.Kind, OutcomeSucceeded, run)
		return
	}
	class := ClassOf(err)
	o.JobFailed(j.Kind, class)
	if errors.Is(err, ErrExpired) {
		o.JobExpired(j.Kind)
	}
	switch {
	case class == ClassPolicy:
		o.JobFinished(j.Kind, OutcomeRejected, run)
	case st == StateDead:
		o.JobFinished(j.Kind, OutcomeDead, run)
	default:
		o.JobFinished(j.Kind, OutcomeRetried, run)
	}
}

// observeCancelledDependents reports the dependents cancelled (by the
// release trigger, transitively) because the jobs ids died. It reads only
// when someone is listening; a failed read costs the figure, not the
// state change that already happened.
func (e *Engine) observeCancelledDependents(ctx context.Context, db Querier, ids []int64) {
	o := e.observer()
	if _, nop := o.(NopObserver); nop || len(ids) == 0 {
		return
	}
	byKind, err := storeCancelledDependents(ctx, db, ids)
	if err != nil {
		e.log.Warn("count cancelled dependents", "error", err.Error())
		return
	}
	for kind, n := range byKind {
		o.JobsCancelled(kind, n)
	}
}

// observeDelay reports a delay by its reason's token: the part before the
// first ':' ("lock_busy:invoice-7" counts as "lock_busy"), which keeps the
// label bounded.
func (e *Engine) observeDelay(j *Job, reason string) {
	if i := strings.IndexByte(reason, ':'); i >= 0 {
		reason = reason[:i]
	}
	e.observer().JobDelayed(j.Kind, reason)
}
