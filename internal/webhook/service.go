package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/keyset"
)

// Enqueuer is the part of the job engine webhooks need.
type Enqueuer interface {
	Enqueue(ctx context.Context, tx job.Querier, p job.EnqueueParams) (job.Enqueued, error)
	EnqueueMany(ctx context.Context, tx job.Querier, ps []job.EnqueueParams) ([]int64, error)
}

// Actor is who manages endpoints, for authorisation and the audit trail.
type Actor struct {
	UserID  int64
	Role    string // membership role: owner, admin or member
	TraceID string
}

func (a Actor) canManage() bool { return a.Role == "owner" || a.Role == "admin" }

// DefaultMaxEndpoints is how many endpoints a tenant may have unless the
// operator sets another limit (JEJAK_WEBHOOK_MAX_ENDPOINTS): each event is
// one delivery per matching endpoint, so endpoints multiply a tenant's
// share of the delivery workers.
const DefaultMaxEndpoints = 50

// Service is what a tenant owner does with webhooks. Every change and
// resend is recorded in the tenant's audit trail in its own transaction.
type Service struct {
	app          database.Pool
	clk          clock.Clock
	jobs         Enqueuer
	audit        *audit.Recorder
	maxEndpoints int
	sealer       *Sealer
}

// NewService returns a Service over the tenant-facing pool, with
// DefaultMaxEndpoints.
func NewService(app database.Pool, clk clock.Clock, jobs Enqueuer) *Service {
	if clk == nil {
		clk = clock.Database{}
	}
	return &Service{app: app, clk: clk, jobs: jobs, audit: audit.NewRecorder(clk), maxEndpoints: DefaultMaxEndpoints}
}

// LimitEndpoints sets how many endpoints a tenant may have (n > 0).
func (s *Service) LimitEndpoints(n int) *Service {
	if n > 0 {
		s.maxEndpoints = n
	}
	return s
}

// SealWith makes the Service store new and rotated secrets sealed by s.
func (s *Service) SealWith(sealer *Sealer) *Service {
	s.sealer = sealer
	return s
}

// Created is a new endpoint and its secret, which is shown only now.
type Created struct {
	Endpoint Endpoint
	Secret   string
}

// Create registers an endpoint receiving the given events ("*" or a
// comma-separated list).
func (s *Service) Create(ctx context.Context, tenantID int64, actor Actor, rawURL, rawEvents string) (Created, error) {
	if !actor.canManage() {
		return Created{}, ErrReadOnly
	}
	u, err := ParseURL(rawURL)
	if err != nil {
		return Created{}, err
	}
	events, err := ParseEvents(rawEvents)
	if err != nil {
		return Created{}, err
	}
	secret, err := NewSecret()
	if err != nil {
		return Created{}, err
	}
	var out Created
	err = database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		st := newStore(tx)
		n, err := st.lockedEndpointCount(ctx, tenantID)
		if err != nil {
			return err
		}
		if n >= int64(s.maxEndpoints) {
			return apperr.Invalidf("url", "This workspace already has %d webhook endpoints, the most it may have.", n)
		}
		stored, err := s.sealer.seal(tenantID, secret)
		if err != nil {
			return err
		}
		ep, err := st.insertEndpoint(ctx, tenantID, s.clk.Now(), u, events, stored, false)
		if err != nil {
			return fmt.Errorf("create webhook endpoint: %w", err)
		}
		out = Created{Endpoint: ep, Secret: secret}
		return s.record(ctx, tx, tenantID, actor, "webhook.endpoint.create", ep.ID, map[string]any{"url": u, "events": events})
	})
	return out, err
}

// Endpoints lists a page of the tenant's endpoints, newest first, from
// the cursor before (0: the first page).
func (s *Service) Endpoints(ctx context.Context, tenantID int64, actor Actor, before int64) (keyset.Page[Endpoint], error) {
	if !actor.canManage() {
		return keyset.Page[Endpoint]{}, ErrReadOnly
	}
	limit := keyset.Limit(0)
	var rows []Endpoint
	err := database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		st := newStore(tx)
		var err error
		if rows, err = st.endpoints(ctx, tenantID, before, limit+1); err != nil {
			return err
		}
		now, err := dbNow(ctx, tx, s.clk)
		if err != nil {
			return err
		}
		return st.health(ctx, tenantID, rows, now)
	})
	return keyset.Cut(rows, limit, func(e *Endpoint) int64 { return e.ID }), err
}

// SetEnabled enables or disables an endpoint.
func (s *Service) SetEnabled(ctx context.Context, tenantID int64, actor Actor, id int64, enabled bool) error {
	if !actor.canManage() {
		return ErrReadOnly
	}
	return database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		ep, err := newStore(tx).setEnabled(ctx, tenantID, id, s.clk.Now(), enabled, ReasonOwner)
		if err != nil {
			return err
		}
		action := "webhook.endpoint.enable"
		if !enabled {
			action = "webhook.endpoint.disable"
		}
		return s.record(ctx, tx, tenantID, actor, action, ep.ID, map[string]any{"url": ep.URL})
	})
}

// Rotate replaces an endpoint's secret; the old one keeps signing beside
// the new one for RotationOverlap. It returns the new secret, shown once.
func (s *Service) Rotate(ctx context.Context, tenantID int64, actor Actor, id int64) (string, error) {
	if !actor.canManage() {
		return "", ErrReadOnly
	}
	secret, err := NewSecret()
	if err != nil {
		return "", err
	}
	err = database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		now, err := dbNow(ctx, tx, s.clk)
		if err != nil {
			return err
		}
		stored, err := s.sealer.seal(tenantID, secret)
		if err != nil {
			return err
		}
		ep, err := newStore(tx).rotate(ctx, tenantID, id, s.clk.Now(), now.Add(RotationOverlap), stored)
		if err != nil {
			return err
		}
		return s.record(ctx, tx, tenantID, actor, "webhook.endpoint.rotate", ep.ID,
			map[string]any{"url": ep.URL, "previous_secret_valid_until": now.Add(RotationOverlap).UTC()})
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// EndpointDeliveries returns an endpoint and its latest deliveries with
// their attempts.
func (s *Service) EndpointDeliveries(ctx context.Context, tenantID int64, actor Actor, id int64, limit int) (Endpoint, []Delivery, error) {
	if !actor.canManage() {
		return Endpoint{}, nil, ErrReadOnly
	}
	var ep Endpoint
	var ds []Delivery
	err := database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		st := newStore(tx)
		var err error
		if ep, err = st.endpoint(ctx, tenantID, id); err != nil {
			return err
		}
		now, err := dbNow(ctx, tx, s.clk)
		if err != nil {
			return err
		}
		eps := []Endpoint{ep}
		if err := st.health(ctx, tenantID, eps, now); err != nil {
			return err
		}
		ep = eps[0]
		if ep.Health.Held, err = st.heldCount(ctx, tenantID, id); err != nil {
			return fmt.Errorf("count held deliveries: %w", err)
		}
		if ds, err = st.deliveries(ctx, tenantID, id, min(max(limit, 1), 200)); err != nil {
			return err
		}
		for i := range ds {
			if ds[i].State == StatePending && ds[i].NextAttempt != nil {
				ds[i].NextIn = max(ds[i].NextAttempt.Sub(now), 0)
			}
		}
		return nil
	})
	return ep, ds, err
}

// Resend sends a delivery again now, whatever its state. Two resends
// before the next attempt ran make one job.
func (s *Service) Resend(ctx context.Context, tenantID int64, actor Actor, endpointID, deliveryID int64) (Delivery, error) {
	if !actor.canManage() {
		return Delivery{}, ErrReadOnly
	}
	var d Delivery
	err := database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		st := newStore(tx)
		var err error
		if d, err = st.delivery(ctx, tenantID, deliveryID); err != nil {
			return err
		}
		if d.EndpointID != endpointID {
			return ErrNotFound
		}
		if _, err := st.endpoint(ctx, tenantID, endpointID); err != nil {
			return err // deleted: its log is kept, not resent
		}
		now := s.clk.Now()
		if err := st.updateDelivery(ctx, tenantID, d.ID, StatePending, d.Attempts, d.LastStatus, d.LastError, nil, now); err != nil {
			return err
		}
		d.State, d.NextAttempt, d.Held = StatePending, nil, false
		if _, err := enqueueAttempt(ctx, tx, s.jobs, tenantID, d.ID, nil, actor.TraceID, &actor.UserID,
			fmt.Sprintf("dlv_%d:resend_after_%d", d.ID, d.Attempts)); err != nil {
			return err
		}
		return s.record(ctx, tx, tenantID, actor, "webhook.delivery.resend", d.ID,
			map[string]any{"endpoint_id": d.EndpointID, "event_id": d.EventID, "event_type": d.EventType})
	})
	return d, err
}

// Delete removes an endpoint: it leaves the list and the count (freeing its
// place under the limit), receives nothing more, and its pending
// deliveries fail; its delivery log stays in the database.
func (s *Service) Delete(ctx context.Context, tenantID int64, actor Actor, id int64) (Endpoint, error) {
	if !actor.canManage() {
		return Endpoint{}, ErrReadOnly
	}
	var ep Endpoint
	err := database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		var err error
		if ep, err = newStore(tx).deleteEndpoint(ctx, tenantID, id, s.clk.Now()); err != nil {
			return err
		}
		return s.record(ctx, tx, tenantID, actor, "webhook.endpoint.delete", ep.ID, map[string]any{"url": ep.URL})
	})
	return ep, err
}

// ParseRateLimit reads the rate field: empty or 0 = no limit, else whole
// messages per second from 1 to MaxRateLimit.
func ParseRateLimit(raw string) (int, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 || n > MaxRateLimit {
		return 0, apperr.Invalidf("rate_limit", "Enter a whole number of messages per second from 1 to %d, or leave it empty for no limit.", MaxRateLimit)
	}
	return n, nil
}

// Settings are an endpoint's delivery options.
type Settings struct {
	// RateLimit is at most this many messages per second (0 = no limit),
	// across every replica.
	RateLimit int
	// Ordered delivers one aggregate's events one at a time, in order.
	Ordered bool
}

// Configure sets an endpoint's delivery options.
func (s *Service) Configure(ctx context.Context, tenantID int64, actor Actor, id int64, c Settings) error {
	if !actor.canManage() {
		return ErrReadOnly
	}
	if c.RateLimit < 0 || c.RateLimit > MaxRateLimit {
		return apperr.Invalidf("rate_limit", "Enter a whole number of messages per second from 1 to %d, or leave it empty for no limit.", MaxRateLimit)
	}
	return database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		ep, err := newStore(tx).configure(ctx, tenantID, id, c, s.clk.Now())
		if err != nil {
			return err
		}
		return s.record(ctx, tx, tenantID, actor, "webhook.endpoint.configure", ep.ID,
			map[string]any{"url": ep.URL, "rate_limit_per_second": c.RateLimit, "ordered": c.Ordered})
	})
}

// RecoverWindows are how far back an owner may recover from the page.
var RecoverWindows = []time.Duration{time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour}

// ParseRecoverWindow reads the recover form's choice, in hours, which must
// be one of RecoverWindows.
func ParseRecoverWindow(rawHours string) (time.Duration, error) {
	h, err := strconv.Atoi(strings.TrimSpace(rawHours))
	if err == nil {
		for _, w := range RecoverWindows {
			if w == time.Duration(h)*time.Hour {
				return w, nil
			}
		}
	}
	return 0, apperr.Invalid("hours", "Choose how far back to recover from the list.")
}

// RecoverLast is Recover of the failed deliveries made within window
// before now.
func (s *Service) RecoverLast(ctx context.Context, tenantID int64, actor Actor, id int64, window time.Duration) (int, error) {
	now, err := dbNow(ctx, s.app, s.clk)
	if err != nil {
		return 0, err
	}
	return s.Recover(ctx, tenantID, actor, id, now.Add(-window))
}

// MaxRecover bounds one recover: a larger backlog takes several.
const MaxRecover = 10000

// Recover sends again every delivery to the endpoint that failed and was
// made since the given time (at most MaxRecover, oldest first), and
// returns how many. Asking twice sends each once: the second finds them
// pending.
func (s *Service) Recover(ctx context.Context, tenantID int64, actor Actor, id int64, since time.Time) (int, error) {
	if !actor.canManage() {
		return 0, ErrReadOnly
	}
	n := 0
	err := database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		st := newStore(tx)
		ep, err := st.endpoint(ctx, tenantID, id)
		if err != nil {
			return err
		}
		now, err := dbNow(ctx, tx, s.clk)
		if err != nil {
			return err
		}
		if since.After(now) {
			return apperr.Invalid("since", "Choose a time in the past.")
		}
		if !ep.Enabled {
			// Its deliveries would fail again at once, as "endpoint disabled".
			return apperr.Invalid("hours", "Enable the endpoint before recovering its deliveries.")
		}
		rs, err := st.recoverFailed(ctx, tenantID, id, since, MaxRecover, s.clk.Now())
		if err != nil {
			return fmt.Errorf("recover deliveries: %w", err)
		}
		for _, r := range rs {
			if _, err := enqueueAttempt(ctx, tx, s.jobs, tenantID, r.id, nil, actor.TraceID, &actor.UserID,
				fmt.Sprintf("dlv_%d:resend_after_%d", r.id, r.attempts)); err != nil {
				return err
			}
		}
		n = len(rs)
		return s.record(ctx, tx, tenantID, actor, "webhook.endpoint.recover", ep.ID,
			map[string]any{"url": ep.URL, "since": since.UTC(), "deliveries": n})
	})
	return n, err
}

func (s *Service) record(ctx context.Context, tx pgx.Tx, tenantID int64, actor Actor, action string, id int64, detail map[string]any) error {
	b, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encode audit detail: %w", err)
	}
	uid := actor.UserID
	entity := "webhook_endpoint"
	if action == "webhook.delivery.resend" {
		entity = "webhook_delivery"
	}
	if err := s.audit.Append(ctx, tx, audit.Event{TenantID: tenantID, ActorKind: audit.ActorUser, ActorID: &uid,
		Action: action, Entity: entity, EntityID: strconv.FormatInt(id, 10), Detail: b, TraceID: actor.TraceID}); err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}

// jobPayload is a webhook.deliver job's payload; it carries its tenant
// like every job payload.
type jobPayload struct {
	TenantID   int64 `json:"tenant_id"`
	DeliveryID int64 `json:"delivery_id"`
}

func enqueueAttempt(ctx context.Context, tx database.Querier, jobs Enqueuer, tenantID, deliveryID int64, at *time.Time, traceID string, requestedBy *int64, key string) (int64, error) {
	e, err := jobs.Enqueue(ctx, tx, jobParams(tenantID, jobPayloadJSON(tenantID, deliveryID), at, traceID, requestedBy, key))
	if err != nil {
		return 0, fmt.Errorf("enqueue webhook delivery %d: %w", deliveryID, err)
	}
	return e.ID, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
