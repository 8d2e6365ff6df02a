package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/queries"
)

// This file is the only one in the package that touches sqlc's types; it
// maps pgx.ErrNoRows to ErrNotFound.

type store struct{ q *queries.Queries }

func newStore(db queries.DBTX) store { return store{queries.New(db)} }

func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

func toEndpoint(r queries.WebhookEndpoint) Endpoint {
	e := Endpoint{ID: r.ID, TenantID: r.TenantID, URL: r.Url, Events: r.Events, Enabled: r.Enabled, CreatedAt: r.CreatedAt}
	if r.DisabledReason != nil {
		e.DisabledReason = *r.DisabledReason
	}
	if r.PreviousSecret != nil {
		e.PreviousUntil = r.PreviousSecretExpiresAt
	}
	e.ConsecutiveFailures, e.FailingSince, e.BreakerOpenUntil = int(r.ConsecutiveFailures), r.FailingSince, r.BreakerOpenUntil
	if r.RateLimit != nil {
		e.RateLimit = int(*r.RateLimit)
	}
	e.Ordered = r.Ordered
	return e
}

func (s store) insertEndpoint(ctx context.Context, tenantID int64, now *time.Time, url string, events []string, secret string, ordered bool) (Endpoint, error) {
	r, err := s.q.WebhookEndpointInsert(ctx, queries.WebhookEndpointInsertParams{TenantID: tenantID, Url: url, Events: events,
		Secret: secret, Ordered: ordered, Now: now})
	return toEndpoint(r), err
}

func (s store) endpoints(ctx context.Context, tenantID, before int64, limit int) ([]Endpoint, error) {
	rows, err := s.q.WebhookEndpointList(ctx, queries.WebhookEndpointListParams{TenantID: tenantID, Before: before, Lim: int32(limit)})
	out := make([]Endpoint, len(rows))
	for i, r := range rows {
		out[i] = toEndpoint(r)
	}
	return out, err
}

// lockedEndpointCount is the tenant's number of endpoints, counted with the
// tenant's creations serialised (the lock lasts until tx ends).
func (s store) lockedEndpointCount(ctx context.Context, tenantID int64) (int64, error) {
	if err := s.q.WebhookEndpointLockTenant(ctx, tenantID); err != nil {
		return 0, fmt.Errorf("lock the tenant's endpoints: %w", err)
	}
	n, err := s.q.WebhookEndpointCount(ctx, tenantID)
	if err != nil {
		return 0, fmt.Errorf("count endpoints: %w", err)
	}
	return n, nil
}

func (s store) endpoint(ctx context.Context, tenantID, id int64) (Endpoint, error) {
	r, err := s.q.WebhookEndpointGet(ctx, queries.WebhookEndpointGetParams{TenantID: tenantID, ID: id})
	return toEndpoint(r), notFound(err)
}

func (s store) setEnabled(ctx context.Context, tenantID, id int64, now *time.Time, enabled bool, reason string) (Endpoint, error) {
	var rp *string
	if !enabled {
		rp = &reason
	}
	r, err := s.q.WebhookEndpointSetEnabled(ctx, queries.WebhookEndpointSetEnabledParams{
		Enabled: enabled, DisabledReason: rp, Now: now, TenantID: tenantID, ID: id})
	return toEndpoint(r), notFound(err)
}

func (s store) rotate(ctx context.Context, tenantID, id int64, now *time.Time, overlapUntil time.Time, secret string) (Endpoint, error) {
	r, err := s.q.WebhookEndpointRotate(ctx, queries.WebhookEndpointRotateParams{
		OverlapUntil: overlapUntil, Secret: secret, Now: now, TenantID: tenantID, ID: id})
	return toEndpoint(r), notFound(err)
}

func (s store) deleteEndpoint(ctx context.Context, tenantID, id int64, now *time.Time) (Endpoint, error) {
	r, err := s.q.WebhookEndpointDelete(ctx, queries.WebhookEndpointDeleteParams{TenantID: tenantID, ID: id, Now: now})
	return toEndpoint(r), notFound(err)
}

func (s store) configure(ctx context.Context, tenantID, id int64, c Settings, now *time.Time) (Endpoint, error) {
	perSecond := c.RateLimit
	var rl *int32
	if perSecond > 0 {
		v := int32(perSecond)
		rl = &v
	}
	r, err := s.q.WebhookEndpointConfigure(ctx, queries.WebhookEndpointConfigureParams{TenantID: tenantID, ID: id, RateLimit: rl,
		Ordered: c.Ordered, Now: now})
	return toEndpoint(r), notFound(err)
}

// claimProbe reports whether this attempt won the half-open breaker's one
// probe; the breaker then stays shut to others until until.
func (s store) claimProbe(ctx context.Context, tenantID, id int64, now, until time.Time) (bool, error) {
	_, err := s.q.WebhookEndpointClaimProbe(ctx, queries.WebhookEndpointClaimProbeParams{TenantID: tenantID, ID: id, Now: now, Until: until})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// takeHolder makes deliveryID, with its job jobID, the delivery that waits
// out the endpoint's open breaker, unless another one already does.
func (s store) takeHolder(ctx context.Context, tenantID, endpointID, deliveryID, jobID int64) (bool, error) {
	_, err := s.q.WebhookEndpointTakeHolder(ctx, queries.WebhookEndpointTakeHolderParams{TenantID: tenantID,
		EndpointID: endpointID, DeliveryID: deliveryID, JobID: jobID})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// hold holds a pending delivery without a job; false when it was not
// pending or already held.
func (s store) hold(ctx context.Context, tenantID, id int64, now time.Time) (bool, error) {
	n, err := s.q.WebhookDeliveryHold(ctx, queries.WebhookDeliveryHoldParams{TenantID: tenantID, ID: id, Now: now})
	return n == 1, err
}

// released is a delivery taken off hold: its id, the user it acts for and
// its event's trace.
type released struct {
	id          int64
	requestedBy *int64
	traceID     string
}

// releaseHeld takes up to limit of an endpoint's held deliveries off hold
// and returns them, oldest first.
func (s store) releaseHeld(ctx context.Context, tenantID, endpointID int64, limit int, now time.Time) ([]released, error) {
	rows, err := s.q.WebhookHeldRelease(ctx, queries.WebhookHeldReleaseParams{TenantID: tenantID, EndpointID: endpointID,
		Lim: int32(limit), Now: now})
	out := make([]released, len(rows))
	for i, r := range rows {
		out[i] = released{r.ID, r.RequestedBy, r.TraceID}
	}
	return out, err
}

// failHeld fails up to limit of an endpoint's held deliveries with lastErr.
func (s store) failHeld(ctx context.Context, tenantID, endpointID int64, limit int, lastErr string, now time.Time) (int64, error) {
	return s.q.WebhookHeldFail(ctx, queries.WebhookHeldFailParams{TenantID: tenantID, EndpointID: endpointID,
		Lim: int32(limit), LastError: lastErr, Now: now})
}

// heldCount counts an endpoint's held deliveries, up to HeldCountCap.
func (s store) heldCount(ctx context.Context, tenantID, endpointID int64) (int64, error) {
	return s.q.WebhookHeldCount(ctx, queries.WebhookHeldCountParams{TenantID: tenantID, EndpointID: endpointID, Cap: HeldCountCap})
}

// heldEndpoints lists up to limit endpoints with held deliveries after
// (afterTenant, afterEndpoint).
func (s store) heldEndpoints(ctx context.Context, afterTenant, afterEndpoint int64, limit int) ([]heldEndpoint, error) {
	rows, err := s.q.WebhookHeldEndpoints(ctx, queries.WebhookHeldEndpointsParams{AfterTenant: afterTenant,
		AfterEndpoint: afterEndpoint, Lim: int32(limit)})
	out := make([]heldEndpoint, len(rows))
	for i, r := range rows {
		out[i] = heldEndpoint{tenantID: r.TenantID, id: r.ID, enabled: r.Enabled, deleted: r.Deleted,
			breakerOpen: r.BreakerOpen, holderWaiting: r.HolderWaiting}
	}
	return out, err
}

// outcome is an endpoint's breaker after an attempt.
type outcome struct {
	failures     int
	failingSince *time.Time
	openUntil    *time.Time
}

// recordAttempt records attempt a of delivery deliveryID (attempted at
// attemptedAt, nil: the database's time) and its outcome at now on
// endpointID's tally and breaker.
func (s store) recordAttempt(ctx context.Context, tenantID, endpointID, deliveryID int64, a Attempt, attemptedAt *time.Time,
	now time.Time, b Breaker) (outcome, error) {
	var code *int32
	if a.StatusCode != 0 {
		c := int32(a.StatusCode)
		code = &c
	}
	var e *string
	if a.Error != "" {
		e = &a.Error
	}
	r, err := s.q.WebhookAttemptRecord(ctx, queries.WebhookAttemptRecordParams{
		TenantID: tenantID, EndpointID: endpointID, DeliveryID: deliveryID, Attempt: int32(a.N), AttemptedAt: attemptedAt,
		StatusCode: code, LatencyMs: int32(a.Latency.Milliseconds()), Response: a.Response, Error: e,
		Ok: a.ok(), Now: now, Threshold: int32(b.Failures), CooldownS: b.Cooldown.Seconds(), MaxCooldownS: b.MaxCooldown.Seconds()})
	if errors.Is(err, pgx.ErrNoRows) {
		// A success that found the endpoint healthy: it stays so. (An
		// endpoint deleted meanwhile keeps its row, soft-deleted.)
		err, r = nil, queries.WebhookAttemptRecordRow{}
	}
	if err != nil {
		return outcome{}, fmt.Errorf("record webhook attempt: %w", err)
	}
	return outcome{failures: int(r.ConsecutiveFailures), failingSince: r.FailingSince, openUntil: r.BreakerOpenUntil}, nil
}

// takeRate counts one message in the endpoint's rate window; false when
// the window is full.
func (s store) takeRate(ctx context.Context, tenantID, id int64, now time.Time) (bool, error) {
	_, err := s.q.WebhookEndpointTakeRate(ctx, queries.WebhookEndpointTakeRateParams{TenantID: tenantID, ID: id, Now: now})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// health fills each endpoint's breaker state and 24 h outcomes.
func (s store) health(ctx context.Context, tenantID int64, eps []Endpoint, now time.Time) error {
	if len(eps) == 0 {
		return nil
	}
	ids := make([]int64, len(eps))
	for i, e := range eps {
		ids[i] = e.ID
	}
	rows, err := s.q.WebhookEndpointHourTotals(ctx, queries.WebhookEndpointHourTotalsParams{TenantID: tenantID, EndpointIds: ids,
		Since: now.Add(-24 * time.Hour).Truncate(time.Hour)})
	if err != nil {
		return fmt.Errorf("endpoint success rates: %w", err)
	}
	for i := range eps {
		eps[i].Health.Breaker = eps[i].BreakerState(now)
		for _, r := range rows {
			if r.EndpointID == eps[i].ID {
				eps[i].Health.Succeeded, eps[i].Health.Failed = r.Succeeded, r.Failed
			}
		}
	}
	return nil
}

type recovered struct {
	id       int64
	attempts int
}

func (s store) recoverFailed(ctx context.Context, tenantID, endpointID int64, since time.Time, limit int, now *time.Time) ([]recovered, error) {
	rows, err := s.q.WebhookDeliveryRecover(ctx, queries.WebhookDeliveryRecoverParams{TenantID: tenantID, EndpointID: endpointID,
		Since: since, Lim: int32(limit), Now: now})
	out := make([]recovered, len(rows))
	for i, r := range rows {
		out[i] = recovered{r.ID, int(r.Attempts)}
	}
	return out, err
}

// match is one endpoint that takes event number Event of a batch.
type match struct {
	Event    int // index into the batch
	Endpoint int64
}

// matching lists the enabled endpoints taking each of events, in event
// order, then endpoint order.
func (s store) matching(ctx context.Context, events []Event) ([]match, error) {
	tenants := make([]int64, len(events))
	types := make([]string, len(events))
	for i, e := range events {
		tenants[i], types[i] = e.TenantID, e.Type
	}
	rows, err := s.q.WebhookEndpointsMatching(ctx, queries.WebhookEndpointsMatchingParams{TenantIds: tenants, EventTypes: types})
	if err != nil {
		return nil, err
	}
	out := make([]match, len(rows))
	for i, r := range rows {
		out[i] = match{Event: int(r.I) - 1, Endpoint: r.ID}
	}
	return out, nil
}

// newDelivery is one delivery to record: an event for one endpoint.
type newDelivery struct {
	TenantID, EndpointID, EventID int64
	EventType, Body               string
	Aggregate                     *string
	RequestedBy                   *int64 // the user the event's deliveries act for
	TraceID                       string // the event's trace
}

// insertDeliveries records ds (no (event, endpoint) pair twice) in one
// statement and returns, in ds's order, each one's id and whether it needs
// a job: this call inserted it (not: the event was recorded before, with
// its job) and did not hold it (its endpoint's breaker is open).
func (s store) insertDeliveries(ctx context.Context, ds []newDelivery, now *time.Time) (ids []int64, needJob []bool, err error) {
	p := queries.WebhookDeliveryInsertParams{Now: now,
		TenantIds: make([]int64, len(ds)), EndpointIds: make([]int64, len(ds)), EventIds: make([]int64, len(ds)),
		EventTypes: make([]string, len(ds)), Bodies: make([]string, len(ds)), Aggregates: make([]string, len(ds)),
		RequestedBys: make([]int64, len(ds)), TraceIds: make([]string, len(ds))}
	type key struct{ endpoint, event int64 }
	at := make(map[key]int, len(ds))
	for i, d := range ds {
		p.TenantIds[i], p.EndpointIds[i], p.EventIds[i] = d.TenantID, d.EndpointID, d.EventID
		p.EventTypes[i], p.Bodies[i] = d.EventType, d.Body
		if d.Aggregate != nil {
			p.Aggregates[i] = *d.Aggregate
		}
		if d.RequestedBy != nil {
			p.RequestedBys[i] = *d.RequestedBy
		}
		p.TraceIds[i] = d.TraceID
		at[key{d.EndpointID, d.EventID}] = i
	}
	rows, err := s.q.WebhookDeliveryInsert(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	if len(rows) != len(ds) {
		return nil, nil, fmt.Errorf("recorded %d of %d webhook deliveries", len(rows), len(ds))
	}
	ids, needJob = make([]int64, len(ds)), make([]bool, len(ds))
	for _, r := range rows {
		i, ok := at[key{r.EndpointID, r.EventID}]
		if !ok {
			return nil, nil, fmt.Errorf("webhook delivery %d: unexpected endpoint %d and event %d", r.ID, r.EndpointID, r.EventID)
		}
		ids[i], needJob[i] = r.ID, r.Inserted && !r.Held
	}
	return ids, needJob, nil
}

type attemptTarget struct {
	queries.WebhookDeliveryForAttemptRow
}

// forAttempt reads what an attempt needs; DbNow is now, or the
// database's time when now is nil.
func (s store) forAttempt(ctx context.Context, tenantID, id int64, now *time.Time) (attemptTarget, error) {
	r, err := s.q.WebhookDeliveryForAttempt(ctx, queries.WebhookDeliveryForAttemptParams{TenantID: tenantID, ID: id, Now: now})
	return attemptTarget{r}, notFound(err)
}

// updateDelivery sets a delivery's state after an attempt or a resend; a
// missing delivery is ErrNotFound.
func (s store) updateDelivery(ctx context.Context, tenantID, id int64, state string, attempts, status int, lastErr string,
	next *time.Time, now *time.Time) error {
	n, err := s.setDelivery(ctx, tenantID, id, state, attempts, status, lastErr, next, now)
	if err == nil && n == 0 {
		return ErrNotFound
	}
	return err
}

// setDelivery is updateDelivery without the check: on a store over
// database.AtCommit the statement is only queued, and n is 0.
func (s store) setDelivery(ctx context.Context, tenantID, id int64, state string, attempts, status int, lastErr string,
	next *time.Time, now *time.Time) (n int64, err error) {
	var st *int32
	if status != 0 {
		v := int32(status)
		st = &v
	}
	var le *string
	if lastErr != "" {
		le = &lastErr
	}
	return s.q.WebhookDeliveryUpdate(ctx, queries.WebhookDeliveryUpdateParams{
		State: state, Attempts: int32(attempts), LastStatus: st, LastError: le, NextAttemptAt: next, Now: now,
		TenantID: tenantID, ID: id})
}

func toDelivery(r queries.WebhookDelivery) Delivery {
	d := Delivery{ID: r.ID, EndpointID: r.EndpointID, EventID: eventID(r.EventID), EventType: r.EventType,
		State: r.State, Attempts: int(r.Attempts), NextAttempt: r.NextAttemptAt, CreatedAt: r.CreatedAt, Held: r.HeldAt != nil}
	if r.LastStatus != nil {
		d.LastStatus = int(*r.LastStatus)
	}
	if r.LastError != nil {
		d.LastError = *r.LastError
	}
	return d
}

func (s store) delivery(ctx context.Context, tenantID, id int64) (Delivery, error) {
	r, err := s.q.WebhookDeliveryGet(ctx, queries.WebhookDeliveryGetParams{TenantID: tenantID, ID: id})
	return toDelivery(r), notFound(err)
}

func (s store) deliveries(ctx context.Context, tenantID, endpointID int64, limit int) ([]Delivery, error) {
	rows, err := s.q.WebhookDeliveryList(ctx, queries.WebhookDeliveryListParams{TenantID: tenantID, EndpointID: endpointID, Lim: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]Delivery, len(rows))
	ids := make([]int64, len(rows))
	idx := map[int64]int{}
	for i, r := range rows {
		out[i] = toDelivery(r)
		ids[i] = r.ID
		idx[r.ID] = i
	}
	if len(ids) == 0 {
		return out, nil
	}
	atts, err := s.q.WebhookAttemptList(ctx, queries.WebhookAttemptListParams{TenantID: tenantID, DeliveryIds: ids})
	if err != nil {
		return nil, err
	}
	for _, a := range atts {
		x := Attempt{N: int(a.Attempt), At: a.AttemptedAt, Latency: time.Duration(a.LatencyMs) * time.Millisecond, Response: a.Response}
		if a.StatusCode != nil {
			x.StatusCode = int(*a.StatusCode)
		}
		if a.Error != nil {
			x.Error = *a.Error
		}
		i := idx[a.DeliveryID]
		out[i].Log = append(out[i].Log, x)
	}
	return out, nil
}

// dbNow is the clock's reading, or the database's now() for the
// production clock.
func dbNow(ctx context.Context, q database.Querier, clk clock.Clock) (time.Time, error) {
	if t := clk.Now(); t != nil {
		return *t, nil
	}
	var t time.Time
	if err := q.QueryRow(ctx, "SELECT now()").Scan(&t); err != nil {
		return t, fmt.Errorf("read database time: %w", err)
	}
	return t, nil
}

func (s store) lockSystem(ctx context.Context) error { return s.q.WebhookSystemLock(ctx) }

func (s store) systemTenant(ctx context.Context) (int64, error) { return s.q.WebhookSystemTenant(ctx) }

// systemRow is the stored endpoint with its secret, which Endpoint leaves
// out everywhere else.
type systemRow struct {
	Endpoint
	secret string
}

func (s store) systemEndpoint(ctx context.Context, tenantID int64, sealer *Sealer) (systemRow, error) {
	r, err := s.q.WebhookSystemEndpoint(ctx, tenantID)
	if err != nil {
		return systemRow{}, notFound(err)
	}
	secret, err := sealer.Open(tenantID, r.Secret)
	if err != nil {
		return systemRow{}, err
	}
	return systemRow{Endpoint: toEndpoint(r), secret: secret}, nil
}

func (s store) setSystemEndpoint(ctx context.Context, tenantID int64, cur systemRow, url string, events []string, secret string,
	enabled bool, reason string, now *time.Time) (Endpoint, error) {
	var rp *string
	if !enabled {
		rp = &reason
	}
	r, err := s.q.WebhookSystemEndpointSet(ctx, queries.WebhookSystemEndpointSetParams{
		Url: url, Events: events, Secret: secret, Enabled: enabled, DisabledReason: rp, Now: now, TenantID: tenantID, ID: cur.ID})
	return toEndpoint(r), notFound(err)
}

func (s store) systemLastDelivery(ctx context.Context, tenantID, endpointID int64) (*Delivery, error) {
	r, err := s.q.WebhookSystemLastDelivery(ctx, queries.WebhookSystemLastDeliveryParams{TenantID: tenantID, EndpointID: endpointID})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &Delivery{ID: r.ID, EndpointID: endpointID, EventID: eventID(r.EventID), State: r.State,
		Attempts: int(r.Attempts), LastStatus: int(r.LastStatus), LastError: r.LastError, CreatedAt: r.UpdatedAt}, nil
}

func (s store) readableSecrets(ctx context.Context) ([]queries.WebhookEndpointReadableSecretsRow, error) {
	return s.q.WebhookEndpointReadableSecrets(ctx)
}

func (s store) sealSecret(ctx context.Context, tenantID, id int64, readable, sealed string, sealedPrevious *string) (bool, error) {
	n, err := s.q.WebhookEndpointSealSecret(ctx, queries.WebhookEndpointSealSecretParams{TenantID: tenantID, ID: id,
		Readable: readable, Sealed: sealed, SealedPrevious: sealedPrevious})
	return n == 1, err
}

func (s store) ownerEmails(ctx context.Context, tenantID int64) ([]string, error) {
	return s.q.WebhookOwnerEmails(ctx, tenantID)
}

func (s store) pruneHours(ctx context.Context, before time.Time) (int64, error) {
	return s.q.WebhookEndpointHoursPrune(ctx, before)
}
