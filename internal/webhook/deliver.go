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
	"github.com/jejakhq/jejak/internal/inflight"
	"github.com/jejakhq/jejak/internal/job"
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
	// not counted.
	TenantLimit int
	inFlight    inflight.Counter
}

func jobPayloadJSON(tenantID, deliveryID int64) json.RawMessage {
	p, _ := json.Marshal(jobPayload{TenantID: tenantID, DeliveryID: deliveryID})
	return p
}

func jobParams(tenantID int64, p json.RawMessage, at *time.Time, traceID, key string) job.EnqueueParams {
	// The job's own retries cover database trouble only; delivery retries
	// follow Schedule as new jobs.
	return job.EnqueueParams{TenantID: tenantID, Kind: Kind, Payload: p, AvailableAt: at, MaxAttempts: 3,
		TraceID: traceID, IdempotencyKey: key}
}

// Handle is the job.Handler of webhook.deliver.
func (d *Deliverer) Handle(ctx context.Context, j *job.Job) error {
	if d.TenantLimit > 0 {
		release, ok := d.inFlight.Take(j.TenantID, d.TenantLimit)
		if !ok {
			return job.Delay(TenantBusyDelay, "tenant_busy")
		}
		defer release()
	}
	return d.handle(ctx, j)
}

func (d *Deliverer) handle(ctx context.Context, j *job.Job) error {
	var p jobPayload
	if err := json.Unmarshal(j.Payload, &p); err != nil || p.DeliveryID <= 0 || p.TenantID != j.TenantID {
		return job.Permanent(fmt.Errorf("webhook.deliver payload: want {tenant_id, delivery_id}"))
	}
	clk := d.Clock
	if clk == nil {
		clk = clock.Database{}
	}
	var t attemptTarget
	var now time.Time
	err := database.InTenantTx(ctx, d.App, j.TenantID, func(tx pgx.Tx) error {
		var err error
		if t, err = newStore(tx).forAttempt(ctx, j.TenantID, p.DeliveryID); err != nil {
			return err
		}
		now, err = dbNow(ctx, tx, clk)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return job.Permanent(fmt.Errorf("webhook delivery %d not found", p.DeliveryID))
	}
	if err != nil {
		return err
	}
	if t.State != StatePending {
		return nil // settled meanwhile (a duplicate job)
	}
	if !t.Enabled {
		return d.settle(ctx, j, t, Attempt{}, StateFailed, "endpoint disabled", nil, false)
	}
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
	if a.StatusCode < 200 || a.StatusCode >= 300 {
		spanErr = errors.New(a.summary())
	}
	span.End(spanErr)
	switch {
	case a.StatusCode >= 200 && a.StatusCode < 300:
		d.outcome("succeeded")
		return d.settle(ctx, j, t, a, StateSucceeded, "", nil, false)
	case a.StatusCode == http.StatusGone:
		d.outcome("gone")
		return d.settle(ctx, j, t, a, StateFailed, errGone.Error(), nil, true)
	case a.N >= MaxAttempts:
		d.outcome("failed")
		return d.settle(ctx, j, t, a, StateFailed, a.summary(), nil, false)
	default:
		d.outcome("retry")
		next := now.Add(retryDelay(a.N, retryAfter))
		return d.settle(ctx, j, t, a, StatePending, a.summary(), &next, false)
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
	msgID := fmt.Sprintf("evt_%d", t.EventID)
	ts := now.Unix()
	body := []byte(t.Body)
	sig, err := Sign(t.Secret, msgID, ts, body)
	if err != nil {
		return Attempt{Error: err.Error()}, 0
	}
	if t.PreviousSecret != nil && t.PreviousSecretExpiresAt != nil && now.Before(*t.PreviousSecretExpiresAt) {
		if old, err := Sign(*t.PreviousSecret, msgID, ts, body); err == nil {
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

// settle records the attempt (when one was made), moves the delivery and,
// for a retry, enqueues the next attempt, in one transaction.
func (d *Deliverer) settle(ctx context.Context, j *job.Job, t attemptTarget, a Attempt, state, lastErr string, next *time.Time, gone bool) error {
	clk := d.Clock
	if clk == nil {
		clk = clock.Database{}
	}
	return database.InTenantTx(ctx, d.App, j.TenantID, func(tx pgx.Tx) error {
		st := newStore(tx)
		attempts := int(t.Attempts)
		if a.N > 0 {
			if err := st.insertAttempt(ctx, j.TenantID, t.ID, a, clk.Now()); err != nil {
				return fmt.Errorf("record webhook attempt: %w", err)
			}
			attempts = a.N
		}
		if _, err := st.updateDelivery(ctx, j.TenantID, t.ID, state, attempts, a.StatusCode, lastErr, next, clk.Now()); err != nil {
			return fmt.Errorf("update webhook delivery: %w", err)
		}
		if next != nil {
			key := fmt.Sprintf("dlv_%d:attempt_%d", t.ID, attempts+1)
			if err := enqueueAttempt(ctx, tx, d.Jobs, j.TenantID, t.ID, next, j.TraceID, key); err != nil {
				return err
			}
		}
		if gone {
			if _, err := st.setEnabled(ctx, j.TenantID, t.EndpointID, clk.Now(), false, "the receiver answered 410 Gone"); err != nil {
				return fmt.Errorf("disable webhook endpoint: %w", err)
			}
			detail, _ := json.Marshal(map[string]any{"url": t.Url, "reason": "410 Gone", "delivery_id": t.ID})
			jid := j.ID
			if err := audit.NewRecorder(clk).Append(ctx, tx, audit.Event{TenantID: j.TenantID, ActorKind: audit.ActorSystem,
				Action: "webhook.endpoint.disable", Entity: "webhook_endpoint", EntityID: itoa(t.EndpointID),
				Detail: detail, TraceID: j.TraceID, JobID: &jid}); err != nil {
				return fmt.Errorf("audit endpoint disable: %w", err)
			}
		}
		return nil
	})
}
