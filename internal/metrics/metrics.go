// Package metrics is Jejak's Prometheus surface: one non-global registry
// holding the job engine's counters and histograms (fed through the
// job.Observer interface, so the engine does not import Prometheus), gauges
// read from a cached queue snapshot at scrape time (never a count of the
// jobs table per scrape), outbox and webhook figures, HTTP request metrics
// per route pattern, connection-pool statistics and build information.
//
// Labels are bounded: kind, queue, state, outcome, class, route, method,
// code, pool. Never a tenant or a job id — per-tenant figures belong on the
// dashboard.
package metrics

import (
	"context"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/jejakhq/jejak/internal/job"
)

// Namespace prefixes every Jejak metric.
const Namespace = "jejak"

// Options configures a Registry. Zero values leave the part out (or, for
// the outbox, report zeros).
type Options struct {
	// Version is reported by jejak_build_info.
	Version string
	// Queues lists the queues whose oldest pending age is always reported
	// (0 when empty), so a rule on a queue that drains has a series.
	Queues []string
	// Snapshot loads the queue gauges; it is called at most once per
	// SnapshotMaxAge whatever the scrape rate. nil = no queue gauges.
	Snapshot func(context.Context) (*QueueSnapshot, error)
	// SnapshotMaxAge bounds the snapshot's staleness; 0 = 5s.
	SnapshotMaxAge time.Duration
	// Outbox reports the outbox gauges; nil = zeros (no outbox wired).
	Outbox func(context.Context) (OutboxSnapshot, error)
	// Audit reports the audit sealer's backlog; nil = zeros.
	Audit func(context.Context) (AuditSnapshot, error)
	// Pools are reported by name (e.g. "app", "system").
	Pools map[string]*pgxpool.Pool
}

// QueueSnapshot is the engine's state at one moment.
type QueueSnapshot struct {
	// Jobs counts live jobs per state (pending, running, dead).
	Jobs map[string]int64
	// OldestPendingAge is, per queue, how long the oldest due pending job
	// has waited (0 when none is due).
	OldestPendingAge map[string]time.Duration
}

// OutboxSnapshot is the outbox's state at one moment.
type OutboxSnapshot struct {
	// Messages counts messages per state (pending, published, failed, ...).
	Messages map[string]int64
	// OldestPendingAge is how long the oldest unpublished message has waited.
	OldestPendingAge time.Duration
}

// AuditSnapshot is the audit sealer's backlog at one moment.
type AuditSnapshot struct {
	// Unsealed counts committed events not yet sealed, all tenants.
	Unsealed int64
	// OldestUnsealedAge is how long the oldest of them has waited.
	OldestUnsealedAge time.Duration
	// Unindexed counts sealed events the name search's index does not
	// cover yet, all tenants.
	Unindexed int64
}

// Registry holds every Jejak metric.
type Registry struct {
	reg        *prometheus.Registry
	collectors []prometheus.Collector

	enqueued, idemSkips, expired, lockDelayed *prometheus.CounterVec
	delayed                                   *prometheus.CounterVec
	finished, failures, missing               *prometheus.CounterVec
	rescued                                   prometheus.Counter
	wait, run                                 *prometheus.HistogramVec
	webhookDeliveries, outboxPublished        *prometheus.CounterVec
	httpRequests                              *prometheus.CounterVec
	httpDuration                              *prometheus.HistogramVec
	alertTransitions                          *prometheus.CounterVec
	alertFiring                               *prometheus.GaugeVec
	sealDelay                                 prometheus.Histogram
	fanout                                    *fanoutCollector
}

// sealBuckets span a sealer that keeps up (tens of milliseconds) to one
// far behind (minutes).
var sealBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// jobBuckets span a no-op job (sub-millisecond) to a long export (minutes).
var jobBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}

// New registers every metric in a fresh registry.
func New(o Options) *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) {
		r.reg.MustRegister(c)
		r.collectors = append(r.collectors, c)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
		f(v)
		return v
	}
	r.enqueued = counter("jobs_enqueued_total", "Jobs written by enqueue (idempotent duplicates excluded).", "kind")
	r.finished = counter("jobs_finished_total", "Job attempts that ended, by outcome (succeeded, retried, dead, cancelled, rejected).", "kind", "outcome")
	r.failures = counter("job_failures_total", "Failed job attempts by failure class (transient, permanent, policy).", "kind", "class")
	r.expired = counter("jobs_expired_total", "Jobs that reached their expiry before they could run.", "kind")
	r.idemSkips = counter("jobs_idempotent_skips_total", "Enqueues that matched an existing idempotency key and wrote nothing.", "kind")
	r.lockDelayed = counter("jobs_lock_delayed_total", "Job attempts delayed because a resource lock was held by another job.", "kind")
	r.delayed = counter("jobs_delayed_total", "Job attempts a handler put back for later, by reason (lock_busy, unknown_version, ...).", "kind", "reason")
	r.missing = counter("jobs_missing_metadata_total", "Jobs enqueued without a request trace or without a requesting user.", "kind", "field")
	r.rescued = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "jobs_rescued_total",
		Help: "Running jobs taken back after their worker lost its lease (crashed or disconnected)."})
	f(r.rescued)
	hist := func(name, help string, labels ...string) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: jobBuckets}, labels)
		f(v)
		return v
	}
	r.wait = hist("job_wait_seconds", "Time from a job being due to its attempt starting.", "kind")
	r.run = hist("job_run_seconds", "Time a job attempt's handler ran.", "kind")
	r.webhookDeliveries = counter("webhook_deliveries_total", "Webhook delivery attempts by outcome.", "outcome")
	r.outboxPublished = counter("outbox_published_total", "Outbox messages published to the broker, by result.", "result")
	r.httpRequests = counter("http_requests_total", "HTTP requests by route pattern, method and status code.", "route", "method", "code")
	r.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "http_request_duration_seconds",
		Help: "HTTP request latency by route pattern and method.", Buckets: prometheus.DefBuckets}, []string{"route", "method"})
	f(r.httpDuration)
	r.alertTransitions = counter("alert_transitions_total", "In-process alert state changes, by rule and new state.", "rule", "state")
	r.alertFiring = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "alerts_firing",
		Help: "1 while an in-process alert rule is firing, else 0.", ConstLabels: nil}, []string{"rule"})
	f(r.alertFiring)

	r.sealDelay = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "audit_seal_delay_seconds",
		Help: "Time from an audit event's transaction to its sealing into the tenant's log.", Buckets: sealBuckets})
	f(r.sealDelay)

	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "build_info",
		Help: "Always 1; labels name the running build."}, []string{"version", "goversion"})
	build.WithLabelValues(or(o.Version, "dev"), runtime.Version()).Set(1)
	f(build)
	f(newSnapshotCollector(o))
	f(&poolCollector{pools: o.Pools}) // no pools: described, never emitted
	r.fanout = &fanoutCollector{}
	f(r.fanout)
	return r
}

// WatchFanout makes jejak_webhook_fanout_pending report pending, read at
// each scrape. The outbox runtime sets it once it has its NATS stream (the
// registry is built before).
func (r *Registry) WatchFanout(pending func(context.Context) (int64, error)) {
	r.fanout.pending.Store(&pending)
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Names lists every metric family the registry can export, whether or
// not it has been observed yet (so rule files can be checked against it).
func (r *Registry) Names() []string {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range r.collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	var out []string
	for d := range ch {
		// Desc has no accessor for its name; its String form starts with it.
		s := d.String()
		if i := strings.Index(s, `fqName: "`); i >= 0 {
			rest := s[i+len(`fqName: "`):]
			if j := strings.IndexByte(rest, '"'); j >= 0 {
				out = append(out, rest[:j])
			}
		}
	}
	return out
}

// Gatherer exposes the registry (tests read values through it).
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Handler serves the registry in the Prometheus text format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// ObserveHTTP counts one request by its route pattern (never its raw path,
// which would carry ids).
func (r *Registry) ObserveHTTP(route, method string, code int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	method = HTTPMethod(method)
	r.httpRequests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	r.httpDuration.WithLabelValues(route, method).Observe(d.Seconds())
}

// WebhookDelivered counts one webhook delivery attempt; outcome is e.g.
// "delivered", "retried", "failed", "rejected" (the outbox relay decides).
func (r *Registry) WebhookDelivered(outcome string) {
	r.webhookDeliveries.WithLabelValues(outcome).Inc()
}

// OutboxPublished counts outbox messages published ("ok") or not ("error").
func (r *Registry) OutboxPublished(result string, n int) {
	r.outboxPublished.WithLabelValues(result).Add(float64(n))
}

// LockDelayed counts an attempt put back because a resource lock was held.
func (r *Registry) LockDelayed(kind string) { r.lockDelayed.WithLabelValues(kind).Inc() }

// JobsCancelled implements job.Observer: jobs that ended cancelled (a dead
// letter staff discarded, a job whose dependency died) count under
// outcome "cancelled", once per job.
func (r *Registry) JobsCancelled(kind string, n int) {
	r.finished.WithLabelValues(kind, string(job.OutcomeCancelled)).Add(float64(n))
}

// ObserveSealDelays records how long sealed audit events waited.
func (r *Registry) ObserveSealDelays(delays []time.Duration) {
	for _, d := range delays {
		r.sealDelay.Observe(d.Seconds())
	}
}

// AlertTransition counts an in-process alert's change of state.
func (r *Registry) AlertTransition(rule, state string) {
	r.alertTransitions.WithLabelValues(rule, state).Inc()
}

// AlertFiring sets whether an in-process alert rule fires now.
func (r *Registry) AlertFiring(rule string, firing bool) {
	v := 0.0
	if firing {
		v = 1
	}
	r.alertFiring.WithLabelValues(rule).Set(v)
}

// The job.Observer implementation.

var _ job.Observer = (*Registry)(nil)

// JobsEnqueued implements job.Observer.
func (r *Registry) JobsEnqueued(kind string, n int) { r.enqueued.WithLabelValues(kind).Add(float64(n)) }

// JobIdempotentSkip implements job.Observer.
func (r *Registry) JobIdempotentSkip(kind string) { r.idemSkips.WithLabelValues(kind).Inc() }

// JobMissingMetadata implements job.Observer.
func (r *Registry) JobMissingMetadata(kind, field string) {
	r.missing.WithLabelValues(kind, field).Inc()
}

// JobStarted implements job.Observer.
func (r *Registry) JobStarted(kind string, wait time.Duration) {
	r.wait.WithLabelValues(kind).Observe(wait.Seconds())
}

// JobFinished implements job.Observer.
func (r *Registry) JobFinished(kind string, outcome job.Outcome, run time.Duration) {
	r.finished.WithLabelValues(kind, string(outcome)).Inc()
	r.run.WithLabelValues(kind).Observe(run.Seconds())
}

// JobFailed implements job.Observer.
func (r *Registry) JobFailed(kind string, class job.Class) {
	r.failures.WithLabelValues(kind, string(class)).Inc()
}

// JobExpired implements job.Observer.
func (r *Registry) JobExpired(kind string) { r.expired.WithLabelValues(kind).Inc() }

// JobDelayed implements job.Observer; lock contention also counts in
// jejak_jobs_lock_delayed_total.
func (r *Registry) JobDelayed(kind, reason string) {
	r.delayed.WithLabelValues(kind, reason).Inc()
	if reason == "lock_busy" {
		r.lockDelayed.WithLabelValues(kind).Inc()
	}
}

// JobsRescued implements job.Observer.
func (r *Registry) JobsRescued(n int) { r.rescued.Add(float64(n)) }

// MethodOther is the label of every request method outside the standard
// set: a label value taken from a request must come from a closed set, or
// anyone can mint series (a stranger's unique 60,000-byte method names grew
// /metrics by hundreds of megabytes).
const MethodOther = "other"

// HTTPMethod is method when it is one of the RFC 9110 methods or PATCH,
// else MethodOther.
func HTTPMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return MethodOther
}
