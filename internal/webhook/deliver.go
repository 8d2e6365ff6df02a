package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clip"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/inflight"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/mail"
	"github.com/jejakhq/jejak/internal/outbox"
	"github.com/jejakhq/jejak/internal/tracing"
)

// Queue is the job queue deliveries go to when they are isolated from
// the rest of the work (OnQueue): a receiver that hangs holds a delivery
// worker for up to Timeout, and must not hold the workers every other
// tenant's jobs need.
const Queue = "webhooks"

// onQueue enqueues every job on one queue.
type onQueue struct {
	Enqueuer
	queue string
}

func (q onQueue) Enqueue(ctx context.Context, tx job.Querier, p job.EnqueueParams) (job.Enqueued, error) {
	p.Queue = q.queue
	return q.Enqueuer.Enqueue(ctx, tx, p)
}

func (q onQueue) EnqueueMany(ctx context.Context, tx job.Querier, ps []job.EnqueueParams) ([]int64, error) {
	on := make([]job.EnqueueParams, len(ps))
	for i, p := range ps {
		p.Queue = q.queue
		on[i] = p
	}
	return q.Enqueuer.EnqueueMany(ctx, tx, on)
}

// OnQueue returns e enqueuing every delivery on queue: give it to the
// Fanout, the Deliverer (retries) and the Service (resends), and run an
// engine working that queue.
func OnQueue(e Enqueuer, queue string) Enqueuer { return onQueue{e, queue} }

// TenantBusyDelay is how long a delivery over its tenant's limit waits
// before it is claimed again (its attempt is not counted).
const TenantBusyDelay = time.Second

// Deliverer performs webhook.deliver jobs: one signed POST per job, its
// outcome recorded, and the next attempt scheduled as a new job.
type Deliverer struct {
	// App is the tenant-facing pool: each attempt reads and writes under
	// the job's tenant.
	App    database.Beginner
	Jobs   Enqueuer
	Clock  clock.Clock
	Client *http.Client // Guard.Client() in production
	Logger *slog.Logger
	// OnOutcome, when set, is told each attempt's outcome (succeeded,
	// retry, failed, gone) for metrics.
	OnOutcome func(outcome string)
	// TenantLimit caps one tenant's deliveries in flight in this process
	// (0 = no cap): a tenant whose receivers hang holds at most this many
	// delivery workers, and the others stay free for other tenants. A
	// delivery over the cap is put back for TenantBusyDelay, its attempt
	// not counted. Within the cap one endpoint gets at most TenantLimit-1
	// places and failing endpoints together too, so one place is always
	// left for the tenant's other, healthy endpoints.
	TenantLimit int
	// Breaker configures the per-endpoint circuit breaker and automatic
	// disabling; zero fields take DefaultBreaker's.
	Breaker Breaker
	// Mailer, when set, tells the tenant's owners and admins when Jejak
	// disables one of their endpoints.
	Mailer mail.Mailer
	// Sealer opens the endpoints' sealed secrets (nil: stored readable).
	Sealer    *Sealer
	inFlight  inflight.Counter // per tenant
	failing   inflight.Counter // per tenant: attempts to failing endpoints
	endpoints inflight.Counter // per endpoint
}

func jobPayloadJSON(tenantID, deliveryID int64) json.RawMessage {
	p, _ := json.Marshal(jobPayload{TenantID: tenantID, DeliveryID: deliveryID})
	return p
}

// firstAttemptKey is the idempotency key of the job of a delivery's first
// attempt: one per (event, endpoint), so an event recorded again enqueues
// nothing.
func firstAttemptKey(eventID, endpointID int64) string {
	return "evt_" + strconv.FormatInt(eventID, 10) + ":ep_" + strconv.FormatInt(endpointID, 10)
}

// jobParams is a delivery attempt's job, requested by the user whose
// action caused the event (nil: the system).
func jobParams(tenantID int64, p json.RawMessage, at *time.Time, traceID string, requestedBy *int64, key string) job.EnqueueParams {
	// The job's own retries cover database trouble only; delivery retries
	// follow Schedule as new jobs.
	return job.EnqueueParams{TenantID: tenantID, Kind: Kind, Payload: p, AvailableAt: at, MaxAttempts: 3,
		TraceID: traceID, RequestedBy: requestedBy, IdempotencyKey: key}
}

func (d *Deliverer) clock() clock.Clock {
	if d.Clock == nil {
		return clock.Database{}
	}
	return d.Clock
}

// Handle is the job.Handler of webhook.deliver. A delivery that may not go
// now (breaker open, an earlier event of its aggregate unfinished, its
// tenant's or endpoint's places taken, the endpoint's rate spent) is put
// back with job.Delay: its attempt is not counted and no worker waits.
func (d *Deliverer) Handle(ctx context.Context, j *job.Job) error {
	var p jobPayload
	if err := json.Unmarshal(j.Payload, &p); err != nil || p.DeliveryID <= 0 || p.TenantID != j.TenantID {
		return job.Permanent(fmt.Errorf("webhook.deliver payload: want {tenant_id, delivery_id}"))
	}
	t, now, wait, why, err := d.load(ctx, j, p.DeliveryID)
	if errors.Is(err, ErrNotFound) {
		return job.Permanent(fmt.Errorf("webhook delivery %d not found", p.DeliveryID))
	}
	if err != nil {
		return err
	}
	switch {
	case t.State != StatePending:
		return nil // settled meanwhile (a duplicate job)
	case t.Deleted:
		return d.settle(ctx, j, t, Attempt{}, now, StateFailed, errEndpointDeleted, nil, "")
	case !t.Enabled:
		return d.settle(ctx, j, t, Attempt{}, now, StateFailed, errEndpointDisabled, nil, "")
	case why == whyHeld:
		return nil // no job until its endpoint's held deliveries are released
	case wait > 0:
		return job.Delay(wait, why)
	}
	release, ok := d.take(j.TenantID, t)
	if !ok {
		return job.Delay(TenantBusyDelay, "tenant_busy")
	}
	defer release()
	if wait, why, err := d.admit(ctx, j, t, now); err != nil || wait > 0 {
		if err != nil {
			return err
		}
		return job.Delay(wait, why)
	}
	return d.attempt(ctx, j, t, now)
}

// load reads the delivery and its endpoint, and whether it must wait
// without taking a place: the breaker is open, or (ordered endpoints) an
// earlier delivery of the same aggregate is unfinished. Most attempts only
// read, in one round trip with the tenant's scoping. Behind an open
// breaker only the holder's job waits; any other pending delivery is held
// (why is whyHeld), which writes: holdOrWait decides that in a
// transaction.
func (d *Deliverer) load(ctx context.Context, j *job.Job, id int64) (t attemptTarget, now time.Time, wait time.Duration, why string, err error) {
	err = database.ReadTenant(ctx, d.App, j.TenantID, func(q database.Querier) (err error) {
		t, err = newStore(q).forAttempt(ctx, j.TenantID, id, d.clock().Now())
		return err
	})
	if err == nil && t.mayBeHeld() {
		var held bool
		if t, held, err = d.holdOrWait(ctx, j, id); held {
			return t, t.DbNow, 0, whyHeld, err
		}
	}
	if err != nil {
		return t, now, 0, "", err
	}
	now = t.DbNow
	switch {
	case t.breakerOpen():
		return t, now, t.BreakerOpenUntil.Sub(now), "breaker_open", nil
	case t.EarlierPending:
		return t, now, OrderedWait, "ordered", nil
	}
	return t, now, 0, "", nil
}

// breakerOpen: the endpoint's breaker is open at the time t was read.
func (t attemptTarget) breakerOpen() bool {
	return t.BreakerOpenUntil != nil && t.BreakerOpenUntil.After(t.DbNow)
}

// mayBeHeld: t is pending behind an open breaker of an endpoint that
// takes deliveries, so it waits as the holder or is held.
func (t attemptTarget) mayBeHeld() bool {
	return t.breakerOpen() && t.State == StatePending && t.Enabled && !t.Deleted
}

// holdOrWait reads the delivery again in a transaction and, while it may
// be held, makes it the breaker's holder (its job then waits) unless
// another delivery is, and holds it otherwise (held).
func (d *Deliverer) holdOrWait(ctx context.Context, j *job.Job, id int64) (t attemptTarget, held bool, err error) {
	err = database.InTenantTx(ctx, d.App, j.TenantID, func(tx pgx.Tx) error {
		st := newStore(tx)
		var err error
		if t, err = st.forAttempt(ctx, j.TenantID, id, d.clock().Now()); err != nil || !t.mayBeHeld() {
			return err
		}
		holder, err := st.takeHolder(ctx, j.TenantID, t.EndpointID, t.ID, j.ID)
		if err != nil || holder {
			return err
		}
		_, err = st.hold(ctx, j.TenantID, t.ID, t.DbNow)
		held = err == nil
		return err
	})
	if err != nil {
		err = fmt.Errorf("webhook delivery behind an open breaker: %w", err)
	}
	return t, held, err
}

// failingRun is how many failed attempts in a row make an endpoint count
// as failing for its places (one place, and failing endpoints together
// at most the tenant's share less one). A receiver that refuses one kind of
// event among its successes must not be cut to one place at every refusal,
// its backlog put back a second at a time; an endpoint that is down gets
// there within its first few attempts.
const failingRun = 3

// take counts the attempt against its tenant's and endpoint's places in
// this process.
func (d *Deliverer) take(tenantID int64, t attemptTarget) (release func(), ok bool) {
	if d.TenantLimit <= 0 {
		return func() {}, true
	}
	share := max(1, d.TenantLimit-1)
	perEndpoint := share
	failing := t.ConsecutiveFailures >= failingRun || t.BreakerOpenUntil != nil
	if failing {
		perEndpoint = 1
	}
	relEndpoint, ok := d.endpoints.Take(t.EndpointID, perEndpoint)
	if !ok {
		return nil, false
	}
	relFailing := func() {}
	if failing {
		if relFailing, ok = d.failing.Take(tenantID, share); !ok {
			relEndpoint()
			return nil, false
		}
	}
	relTenant, ok := d.inFlight.Take(tenantID, d.TenantLimit)
	if !ok {
		relFailing()
		relEndpoint()
		return nil, false
	}
	return func() { relTenant(); relFailing(); relEndpoint() }, true
}

// admit spends the endpoint's rate and, when its breaker is half-open,
// claims the one probe; wait > 0 when the attempt must wait.
func (d *Deliverer) admit(ctx context.Context, j *job.Job, t attemptTarget, now time.Time) (wait time.Duration, why string, err error) {
	halfOpen := t.BreakerOpenUntil != nil
	if t.RateLimit == nil && !halfOpen {
		return 0, "", nil
	}
	err = database.InTenantTx(ctx, d.App, j.TenantID, func(tx pgx.Tx) error {
		st := newStore(tx)
		if t.RateLimit != nil {
			ok, err := st.takeRate(ctx, j.TenantID, t.EndpointID, now)
			if err != nil {
				return fmt.Errorf("endpoint rate: %w", err)
			}
			if !ok {
				wait, why = RateWait, "rate_limited"
				return nil
			}
		}
		if halfOpen {
			won, err := st.claimProbe(ctx, j.TenantID, t.EndpointID, now, now.Add(Timeout+probeSlack))
			if err != nil {
				return fmt.Errorf("claim breaker probe: %w", err)
			}
			if !won {
				wait, why = Timeout, "breaker_probing"
			}
		}
		return nil
	})
	return wait, why, err
}

// attempt POSTs the delivery and settles its outcome.
func (d *Deliverer) attempt(ctx context.Context, j *job.Job, t attemptTarget, now time.Time) error {
	// The attempt's span is a child of the job attempt's (ctx carries it),
	// so an exported trace ends with the HTTP call to the receiver.
	sctx, span := tracing.Start(ctx, "webhook.deliver", "",
		attribute.Int64("jejak.delivery_id", t.ID), attribute.Int64("jejak.event_id", t.EventID),
		attribute.Int64("jejak.tenant_id", j.TenantID), attribute.Int("jejak.attempt", int(t.Attempts)+1))
	a, retryAfter := d.post(sctx, t, now)
	a.N = int(t.Attempts) + 1
	a.At = now
	span.Set(attribute.Int("http.response.status_code", a.StatusCode))
	var spanErr error
	if !a.ok() {
		spanErr = errors.New(a.summary())
	}
	span.End(spanErr)
	switch {
	case a.ok():
		d.outcome("succeeded")
		return d.settle(ctx, j, t, a, now, StateSucceeded, "", nil, "")
	case a.StatusCode == http.StatusGone:
		d.outcome("gone")
		return d.settle(ctx, j, t, a, now, StateFailed, errGone.Error(), nil, ReasonGone)
	case a.N >= MaxAttempts:
		d.outcome("failed")
		return d.settle(ctx, j, t, a, now, StateFailed, a.summary(), nil, "")
	default:
		d.outcome("retry")
		next := now.Add(retryDelay(a.N, retryAfter))
		return d.settle(ctx, j, t, a, now, StatePending, a.summary(), &next, "")
	}
}

func (d *Deliverer) outcome(o string) {
	if d.OnOutcome != nil {
		d.OnOutcome(o)
	}
}

// post sends one signed attempt. It never returns an error: every failure
// is an attempt outcome.
func (d *Deliverer) post(ctx context.Context, t attemptTarget, now time.Time) (Attempt, time.Duration) {
	msgID := eventID(t.EventID)
	ts := now.Unix()
	body := []byte(t.Body)
	secret, err := d.Sealer.Open(t.TenantID, t.Secret)
	if err != nil {
		return Attempt{Error: err.Error()}, 0
	}
	sig, err := Sign(secret, msgID, ts, body)
	if err != nil {
		return Attempt{Error: err.Error()}, 0
	}
	if t.PreviousSecret != nil && t.PreviousSecretExpiresAt != nil && now.Before(*t.PreviousSecretExpiresAt) {
		prev, err := d.Sealer.Open(t.TenantID, *t.PreviousSecret)
		if err != nil {
			return Attempt{Error: err.Error()}, 0
		}
		if old, err := Sign(prev, msgID, ts, body); err == nil {
			sig += " " + old
		}
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.Url, bytes.NewReader(body))
	if err != nil {
		return Attempt{Error: "bad endpoint URL: " + err.Error()}, 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Jejak-Webhooks/1")
	req.Header.Set("webhook-id", msgID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", sig)
	client := d.Client
	if client == nil {
		client = Guard{}.Client()
	}
	// Latency is a measured duration, not a domain time: the monotonic
	// clock is the right tool.
	start := time.Now()
	resp, err := client.Do(req)
	a := Attempt{}
	if err != nil {
		a.Latency = time.Since(start)
		a.Error = clip.Bytes(describeError(err), 500)
		return a, 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponse))
	a.Latency = time.Since(start)
	a.StatusCode = resp.StatusCode
	a.Response = strings.ToValidUTF8(strings.ReplaceAll(string(b), "\x00", ""), "�")
	var retryAfter time.Duration
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now)
	}
	return a, retryAfter
}

// ok is a 2xx answer.
func (a Attempt) ok() bool { return a.StatusCode >= 200 && a.StatusCode < 300 }

func (a Attempt) summary() string {
	if a.Error != "" {
		return a.Error
	}
	return fmt.Sprintf("HTTP %d", a.StatusCode)
}

// parseRetryAfter reads delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// settle records the attempt (when one was made) and what it did to the
// endpoint's breaker, moves the delivery and, for a retry, enqueues the
// next attempt, in one transaction. disable ("" = no) disables the
// endpoint for that reason; a failure that ends a run of Breaker.DisableAfter
// without success disables it too.
func (d *Deliverer) settle(ctx context.Context, j *job.Job, t attemptTarget, a Attempt, now time.Time, state, lastErr string, next *time.Time, disable string) error {
	clk := d.clock()
	disabled := ""
	err := database.InTenantTx(ctx, d.App, j.TenantID, func(tx pgx.Tx) error {
		disabled = ""
		st := newStore(tx)
		probe := false // the breaker is open and this delivery's retry may probe it
		attempts := int(t.Attempts)
		if a.N > 0 {
			attempts = a.N
			out, err := st.recordAttempt(ctx, j.TenantID, t.EndpointID, t.ID, a, clk.Now(), now, d.Breaker.withDefaults())
			if err != nil {
				return err
			}
			switch {
			case a.ok() && t.BreakerOpenUntil != nil:
				// The probe closed the breaker: the deliveries held behind
				// it go back to the queue (the sweep releases the rest).
				if _, err := releaseHeld(ctx, tx, d.Jobs, j.TenantID, t.EndpointID, heldBatch, now); err != nil {
					return err
				}
			case out.openUntil != nil && next != nil:
				// The breaker is open and this delivery is to be retried:
				// the retry comes up when the breaker's time is up, to
				// probe it as the holder (below), or to be held if another
				// delivery holds the breaker by then. What the fan-out
				// records meanwhile is held from the start.
				probe = true
				if out.openUntil.Before(*next) {
					next = out.openUntil
				}
			case t.HeldWaiting && out.openUntil == nil:
				// Each attempt that leaves the breaker closed makes room
				// for one more of the backlog (a failed one's retry waits
				// for its time in the schedule), so the released ones
				// keep the endpoint as busy as it can be until the
				// backlog is gone, without waiting for the sweep's passes.
				if _, err := releaseHeld(ctx, tx, d.Jobs, j.TenantID, t.EndpointID, 1, now); err != nil {
					return err
				}
			}
			if disable == "" && !a.ok() && out.failingSince != nil && now.Sub(*out.failingSince) >= d.Breaker.withDefaults().DisableAfter {
				disable = ReasonFailing
			}
		}
		var err error
		if a.N > 0 {
			// The attempt's row references the delivery and keeps it to
			// the commit, so its update cannot miss: it rides with COMMIT.
			_, err = newStore(database.AtCommit(tx)).setDelivery(ctx, j.TenantID, t.ID, state, attempts, a.StatusCode, lastErr, next, clk.Now())
		} else {
			err = st.updateDelivery(ctx, j.TenantID, t.ID, state, attempts, a.StatusCode, lastErr, next, clk.Now())
		}
		if err != nil {
			return fmt.Errorf("update webhook delivery: %w", err)
		}
		if next != nil {
			key := fmt.Sprintf("dlv_%d:attempt_%d", t.ID, attempts+1)
			retry, err := enqueueAttempt(ctx, tx, d.Jobs, j.TenantID, t.ID, next, j.TraceID, j.RequestedBy, key)
			if err != nil {
				return err
			}
			if probe {
				if _, err := st.takeHolder(ctx, j.TenantID, t.EndpointID, t.ID, retry); err != nil {
					return fmt.Errorf("take breaker holder: %w", err)
				}
			}
		}
		if disable != "" {
			disabled = disable
			return d.disable(ctx, tx, j, t, disable)
		}
		return nil
	})
	if err == nil && disabled != "" {
		d.notifyDisabled(ctx, j.TenantID, t, disabled)
	}
	return err
}

// notifyDisabled mails the tenant's owners and admins that Jejak disabled
// an endpoint, after the change committed. The trail and the
// webhook.endpoint.disabled event are the lasting record, so a mail that
// cannot go out is logged, not retried.
func (d *Deliverer) notifyDisabled(ctx context.Context, tenantID int64, t attemptTarget, reason string) {
	if d.Mailer == nil {
		return
	}
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	var to []string
	err := database.InTenantTx(ctx, d.App, tenantID, func(tx pgx.Tx) error {
		var err error
		to, err = newStore(tx).ownerEmails(ctx, tenantID)
		return err
	})
	if err != nil || len(to) == 0 {
		log.Warn("webhook endpoint disabled: no owner to tell", "tenant_id", tenantID, "endpoint_id", t.EndpointID, "err", err)
		return
	}
	// Recipients are addresses, not accounts with a chosen language: the
	// notice is in Bahasa Indonesia and then English, as the weekly report.
	var subjects, bodies []string
	for _, lang := range []string{i18n.ID, i18n.EN} {
		subjects = append(subjects, i18n.In(lang, "mail.webhook_disabled.subject", t.Url))
		bodies = append(bodies, i18n.In(lang, "mail.webhook_disabled.body", t.Url, i18n.In(lang, reason)))
	}
	m := mail.Message{TenantID: tenantID, ID: fmt.Sprintf("webhook-disabled.%d.%d@jejak", t.EndpointID, t.ID),
		From: mail.DefaultFrom, To: to, Subject: strings.Join(subjects, " / "), Text: strings.Join(bodies, "\n--------\n\n")}
	if err := d.Mailer.Send(ctx, m); err != nil {
		log.Warn("webhook endpoint disabled: notice not sent", "tenant_id", tenantID, "endpoint_id", t.EndpointID, "err", err.Error())
	}
}

// disable turns the endpoint off for reason, records it in the tenant's
// trail with the system as actor, and tells the tenant's other endpoints
// with a webhook.endpoint.disabled event.
func (d *Deliverer) disable(ctx context.Context, tx pgx.Tx, j *job.Job, t attemptTarget, reason string) error {
	clk := d.clock()
	ep, err := newStore(tx).setEnabled(ctx, j.TenantID, t.EndpointID, clk.Now(), false, reason)
	if err != nil {
		return fmt.Errorf("disable webhook endpoint: %w", err)
	}
	detail := map[string]any{"endpoint_id": ep.ID, "url": ep.URL, "reason": reason, "delivery_id": t.ID,
		"consecutive_failures": ep.ConsecutiveFailures}
	if ep.FailingSince != nil {
		detail["failing_since"] = ep.FailingSince.UTC()
	}
	raw, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encode disable detail: %w", err)
	}
	jid := j.ID
	if err := audit.NewRecorder(clk).Append(ctx, tx, audit.Event{TenantID: j.TenantID, ActorKind: audit.ActorSystem,
		Action: "webhook.endpoint.disable", Entity: "webhook_endpoint", EntityID: itoa(t.EndpointID),
		Detail: raw, TraceID: j.TraceID, JobID: &jid}); err != nil {
		return fmt.Errorf("audit endpoint disable: %w", err)
	}
	if _, err := outbox.NewWriter(clk).Publish(ctx, tx, j.TenantID, outbox.Message{Type: EventEndpointDisabled,
		AggregateType: "webhook_endpoint", AggregateID: itoa(ep.ID), Payload: raw, TraceID: j.TraceID}); err != nil {
		return fmt.Errorf("publish endpoint disabled: %w", err)
	}
	return nil
}
