package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/sensitive"
)

// Job kinds.
const (
	ChargeKind    = "payment.charge"
	ReconcileKind = "payment.reconcile"
)

// ChargeLockLease outlives one provider call (the HTTP client's timeout),
// so a slow charge keeps its invoice; a crashed worker's lock expires.
const ChargeLockLease = 2 * time.Minute

// Invoice is a bill for a plan.
type Invoice struct {
	ID        int64
	TenantID  int64
	Plan      string
	Amount    int64
	Status    string
	ChargeRef string
	CreatedAt time.Time
	PaidAt    *time.Time
}

// RefundRecord is a duplicate charge reconciliation refunded.
type RefundRecord struct {
	InvoiceID int64
	ChargeRef string
	RefundRef string
	Amount    int64
	Reason    string
	CreatedAt time.Time
}

// Billing is what the tenant's billing page shows.
type Billing struct {
	Invoices []Invoice
	Refunds  []RefundRecord
	Charges  []Charge
	// ChargesErr is set when the provider could not be asked; invoices and
	// refunds (Jejak's own records) still show.
	ChargesErr string
}

// Enqueuer is the part of the job engine the service needs.
type Enqueuer interface {
	Enqueue(ctx context.Context, tx job.Querier, p job.EnqueueParams) (job.Enqueued, error)
}

// Service creates invoices, runs charges and reconciliations, and reads a
// tenant's billing.
type Service struct {
	app      database.Pool
	system   database.Pool
	clock    clock.Clock
	provider Provider
	jobs     Enqueuer
	rec      *audit.Recorder
}

// NewService returns a Service.
func NewService(app, system database.Pool, p Provider, jobs Enqueuer, c clock.Clock) *Service {
	if c == nil {
		c = clock.Database{}
	}
	return &Service{app: app, system: system, clock: c, provider: p, jobs: jobs, rec: audit.NewRecorder(c)}
}

// TenantRef is how a tenant is named to the provider.
func TenantRef(tenantID int64) string { return "tenant_" + strconv.FormatInt(tenantID, 10) }

// InvoiceRef is how an invoice is named to the provider.
func InvoiceRef(invoiceID int64) string { return "inv_" + strconv.FormatInt(invoiceID, 10) }

type chargePayload struct {
	TenantID  int64 `json:"tenant_id"`
	InvoiceID int64 `json:"invoice_id"`
}

// OnPlanChange runs in the plan change's transaction: moving to a paid
// plan creates an invoice and enqueues its charge with the invoice as
// idempotency key, so the charge exists if and only if the change commits.
func (s *Service) OnPlanChange(ctx context.Context, tx pgx.Tx, tenantID int64, actorID *int64, toPlan, traceID string) error {
	price, err := planPrice(ctx, tx, toPlan)
	if err != nil {
		return err
	}
	if price <= 0 {
		return nil
	}
	now, err := sensitive.Now(ctx, tx, s.clock)
	if err != nil {
		return err
	}
	inv, err := insertInvoice(ctx, tx, tenantID, toPlan, price, now, actorID)
	if err != nil {
		return err
	}
	detail, _ := json.Marshal(map[string]any{"plan": toPlan, "amount_idr": price})
	kind := audit.ActorSystem
	if actorID != nil {
		kind = audit.ActorUser
	}
	if err := s.rec.Append(ctx, tx, audit.Event{TenantID: tenantID, ActorKind: kind, ActorID: actorID, Action: "invoice.created",
		Entity: "invoice", EntityID: strconv.FormatInt(inv.ID, 10), Detail: detail, TraceID: traceID}); err != nil {
		return err
	}
	payload, _ := json.Marshal(chargePayload{TenantID: tenantID, InvoiceID: inv.ID})
	_, err = s.jobs.Enqueue(ctx, tx, job.EnqueueParams{TenantID: tenantID, Kind: ChargeKind, Payload: payload,
		RequestedBy: actorID, TraceID: traceID, IdempotencyKey: "invoice:" + strconv.FormatInt(inv.ID, 10)})
	if err != nil {
		return fmt.Errorf("enqueue charge of invoice %d: %w", inv.ID, err)
	}
	return nil
}

// HandleCharge is the payment.charge handler. The invoice's lock is held
// across the provider call; the idempotency key is claimed (and committed
// as started) before the call, so a completed charge is never repeated by
// Jejak, and the provider is asked with the invoice as Idempotency-Key so
// a retry after a lost answer is deduplicated there too, when the
// provider honours it. When it does not, reconciliation refunds.
func (s *Service) HandleCharge(ctx context.Context, j *job.Job) error {
	var p chargePayload
	if err := json.Unmarshal(j.Payload, &p); err != nil || p.InvoiceID <= 0 || p.TenantID != j.TenantID {
		return job.Permanent(fmt.Errorf("payment.charge: invalid payload %.200s", j.Payload))
	}
	now, err := sensitive.Now(ctx, s.system, s.clock)
	if err != nil {
		return err
	}
	resource := "invoice:" + strconv.FormatInt(p.InvoiceID, 10)
	lock, ok, err := sensitive.AcquireLock(ctx, s.system, now, j.TenantID, resource, sensitive.HolderOf(j), ChargeLockLease)
	if err != nil {
		return err
	}
	if !ok {
		return sensitive.LockBusy(resource)
	}
	release := func() { _ = lock.Release(context.WithoutCancel(ctx), s.system) }
	key := "charge:" + resource
	inv, done, err := s.chargeClaim(ctx, j, now, resource, key, p.InvoiceID)
	if err != nil || done {
		release()
		return err
	}
	ch, cerr := s.provider.Charge(ctx, ChargeRequest{IdempotencyKey: "invoice:" + strconv.FormatInt(inv.ID, 10),
		Amount: inv.Amount, Currency: "IDR", Tenant: TenantRef(j.TenantID), Invoice: InvoiceRef(inv.ID)})
	if cerr != nil && !errors.Is(cerr, ErrDeclined) {
		release() // transient: the engine retries with backoff
		return cerr
	}
	err = database.InTx(ctx, s.system, func(tx pgx.Tx) error {
		if err := s.chargeOutcome(ctx, tx, j, now, key, inv, ch, cerr); err != nil {
			return err
		}
		return lock.Release(ctx, tx)
	})
	if err != nil {
		release()
		return err
	}
	if cerr != nil {
		return job.Permanent(cerr)
	}
	return nil
}

// chargeClaim claims the charge's idempotency key and reads the invoice to
// charge; done when there is nothing to charge (the key was completed
// before, or the invoice is paid).
func (s *Service) chargeClaim(ctx context.Context, j *job.Job, now time.Time, resource, key string, invoiceID int64) (inv Invoice, done bool, err error) {
	err = database.InTx(ctx, s.system, func(tx pgx.Tx) error {
		k, err := sensitive.ClaimKey(ctx, tx, now, j.TenantID, key, ChargeKind, resource, &j.ID)
		if err != nil {
			return err
		}
		if !k.First && k.Status == sensitive.KeyCompleted {
			done = true
			return sensitive.RecordSkipped(ctx, tx, s.clock, j, k)
		}
		inv, err = getInvoice(ctx, tx, j.TenantID, invoiceID)
		if errors.Is(err, ErrNoInvoice) {
			return job.Permanent(fmt.Errorf("invoice %d: %w", invoiceID, err))
		}
		if err != nil {
			return err
		}
		if inv.Status == "paid" {
			done = true
			return sensitive.CompleteKey(ctx, tx, now, j.TenantID, key, inv.ChargeRef)
		}
		return nil
	})
	return inv, done, err
}

// chargeOutcome records the provider's answer in tx: the invoice failed
// (cerr, a decline) or paid with ch, its trail event, and the key completed.
func (s *Service) chargeOutcome(ctx context.Context, tx pgx.Tx, j *job.Job, now time.Time, key string, inv Invoice, ch Charge, cerr error) error {
	jobID := j.ID
	if cerr != nil {
		if err := markFailed(ctx, tx, j.TenantID, inv.ID); err != nil {
			return err
		}
		if err := s.event(ctx, tx, j.TenantID, "payment.declined", "invoice", inv.ID, j.TraceID, &jobID,
			map[string]any{"error": cerr.Error()}); err != nil {
			return err
		}
		return sensitive.CompleteKey(ctx, tx, now, j.TenantID, key, "declined")
	}
	if _, err := markPaid(ctx, tx, j.TenantID, inv.ID, ch.ID, now); err != nil {
		return err
	}
	if err := s.event(ctx, tx, j.TenantID, "payment.charged", "invoice", inv.ID, j.TraceID, &jobID,
		map[string]any{"charge": ch.ID, "amount_idr": ch.Amount}); err != nil {
		return err
	}
	return sensitive.CompleteKey(ctx, tx, now, j.TenantID, key, ch.ID)
}

func (s *Service) event(ctx context.Context, tx pgx.Tx, tenantID int64, action, entity string, id int64, trace string, jobID *int64, detail map[string]any) error {
	raw, err := json.Marshal(detail)
	if err != nil {
		return err
	}
	err = s.rec.Append(ctx, tx, audit.Event{TenantID: tenantID, ActorKind: audit.ActorSystem, Action: action,
		Entity: entity, EntityID: strconv.FormatInt(id, 10), Detail: raw, TraceID: trace, JobID: jobID})
	if err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}

type reconcilePayload struct {
	TenantID int64 `json:"tenant_id"`
}

// ReconcileResult counts what one reconciliation did.
type ReconcileResult struct {
	Duplicates int
	Refunded   int
	MarkedPaid int
}

// HandleReconcile is the payment.reconcile handler for one tenant.
func (s *Service) HandleReconcile(ctx context.Context, j *job.Job) error {
	var p reconcilePayload
	if err := json.Unmarshal(j.Payload, &p); err != nil || p.TenantID != j.TenantID {
		return job.Permanent(fmt.Errorf("payment.reconcile: invalid payload %.200s", j.Payload))
	}
	_, err := s.Reconcile(ctx, j)
	return err
}

// Reconcile compares the provider's charges of the job's tenant with its
// invoices: an invoice charged more than once keeps the charge it was
// paid with (or the first) and every other live charge is refunded through
// the provider, with the refund keyed by the charge so that runs twice or
// at once refund it once; detection and refund are recorded in the
// tenant's trail together with the refund row. An open invoice the
// provider did charge (its answer was lost) is marked paid.
func (s *Service) Reconcile(ctx context.Context, j *job.Job) (ReconcileResult, error) {
	var res ReconcileResult
	now, err := sensitive.Now(ctx, s.system, s.clock)
	if err != nil {
		return res, err
	}
	resource := "reconcile:" + TenantRef(j.TenantID)
	lock, ok, err := sensitive.AcquireLock(ctx, s.system, now, j.TenantID, resource, sensitive.HolderOf(j), ChargeLockLease)
	if err != nil {
		return res, err
	}
	if !ok {
		return res, sensitive.LockBusy(resource)
	}
	defer func() { _ = lock.Release(context.WithoutCancel(ctx), s.system) }()
	charges, err := s.provider.Charges(ctx, TenantRef(j.TenantID))
	if err != nil {
		return res, err
	}
	refs, byInvoice := liveByInvoice(charges)
	for _, ref := range refs {
		num, ok := strings.CutPrefix(ref, "inv_")
		invID, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil {
			continue // not one of Jejak's invoices
		}
		if err := s.reconcileInvoice(ctx, j, now, invID, byInvoice[ref], &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// liveByInvoice groups the charges not wholly refunded by the invoice they
// name, and lists those invoices in order.
func liveByInvoice(charges []Charge) (refs []string, byInvoice map[string][]Charge) {
	byInvoice = map[string][]Charge{}
	for _, c := range charges {
		if c.Refunded < c.Amount {
			byInvoice[c.Invoice] = append(byInvoice[c.Invoice], c)
		}
	}
	refs = make([]string, 0, len(byInvoice))
	for ref := range byInvoice {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	return refs, byInvoice
}

// reconcileInvoice settles one invoice against its live charges: it keeps
// the charge the invoice was paid with (or the first), marks an open
// invoice paid with it, and refunds every other.
func (s *Service) reconcileInvoice(ctx context.Context, j *job.Job, now time.Time, invID int64, live []Charge, res *ReconcileResult) error {
	inv, err := getInvoice(ctx, s.system, j.TenantID, invID)
	if errors.Is(err, ErrNoInvoice) {
		return nil
	}
	if err != nil {
		return err
	}
	keep := live[0]
	for _, c := range live {
		if c.ID == inv.ChargeRef {
			keep = c
		}
	}
	jobID := j.ID
	if inv.Status != "paid" {
		err := database.InTx(ctx, s.system, func(tx pgx.Tx) error {
			if ok, err := markPaid(ctx, tx, j.TenantID, inv.ID, keep.ID, now); err != nil || !ok {
				return err
			}
			res.MarkedPaid++
			return s.event(ctx, tx, j.TenantID, "payment.reconciled_paid", "invoice", inv.ID, j.TraceID, &jobID,
				map[string]any{"charge": keep.ID, "reason": "provider charged; the answer was lost"})
		})
		if err != nil {
			return err
		}
	}
	for _, c := range live {
		if c.ID == keep.ID {
			continue
		}
		res.Duplicates++
		if err := s.refundDuplicate(ctx, j, now, inv, keep, c, res); err != nil {
			return err
		}
	}
	return nil
}

// refundDuplicate refunds charge c of inv through the provider (keyed by
// the charge) and records the refund with its trail events, once.
func (s *Service) refundDuplicate(ctx context.Context, j *job.Job, now time.Time, inv Invoice, keep, c Charge, res *ReconcileResult) error {
	jobID := j.ID
	amount := c.Amount - c.Refunded
	reason := fmt.Sprintf("duplicate charge of invoice %d (kept %s)", inv.ID, keep.ID)
	r, err := s.provider.Refund(ctx, "refund:"+c.ID, c.ID, amount, reason)
	if err != nil {
		return fmt.Errorf("refund %s: %w", c.ID, err)
	}
	return database.InTx(ctx, s.system, func(tx pgx.Tx) error {
		first, err := insertRefund(ctx, tx, j.TenantID, RefundRecord{InvoiceID: inv.ID, ChargeRef: c.ID, RefundRef: r.ID,
			Amount: amount, Reason: reason}, now, &jobID)
		if err != nil || !first {
			return err // !first: refunded by an earlier or concurrent run
		}
		res.Refunded++
		if err := s.event(ctx, tx, j.TenantID, "payment.duplicate_detected", "invoice", inv.ID, j.TraceID, &jobID,
			map[string]any{"charges": []string{keep.ID, c.ID}, "kept": keep.ID, "duplicate": c.ID, "amount_idr": c.Amount}); err != nil {
			return err
		}
		return s.event(ctx, tx, j.TenantID, "payment.refunded", "invoice", inv.ID, j.TraceID, &jobID,
			map[string]any{"charge": c.ID, "refund": r.ID, "amount_idr": amount, "reason": reason})
	})
}

// ErrReconcileActive: the tenant already has a payment.reconcile job
// queued or running.
var ErrReconcileActive = &apperr.Error{Code: apperr.CodeConflict,
	Message: "A reconcile of this tenant is already queued or running: wait for it to finish."}

// EnqueueReconcile queues a reconciliation of one tenant now (staff's
// on-demand button), recorded in the tenant's trail; at most one per
// tenant is queued or running (ErrReconcileActive).
func (s *Service) EnqueueReconcile(ctx context.Context, tenantID, staffID int64, traceID string) (int64, error) {
	if s.jobs == nil {
		return 0, apperr.Forbidden("the job engine is not configured")
	}
	var id int64
	err := database.InTx(ctx, s.system, func(tx pgx.Tx) error {
		// One reconcile per tenant at a time: a second request while one
		// is queued or running would only repeat it. The lock makes two
		// concurrent requests check one after the other.
		active, err := activeReconcile(ctx, tx, tenantID)
		if err != nil {
			return err
		}
		if active != 0 {
			return ErrReconcileActive
		}
		payload, _ := json.Marshal(reconcilePayload{TenantID: tenantID})
		enq, err := s.jobs.Enqueue(ctx, tx, job.EnqueueParams{TenantID: tenantID, Kind: ReconcileKind, Payload: payload,
			RequestedBy: &staffID, TraceID: traceID})
		if err != nil {
			return err
		}
		id = enq.ID
		detail, _ := json.Marshal(map[string]any{"job_id": enq.ID})
		err = s.rec.Append(ctx, tx, audit.Event{TenantID: tenantID, ActorKind: audit.ActorStaff, ActorID: &staffID,
			Action: "payment.reconcile_requested", Entity: "tenant", EntityID: strconv.FormatInt(tenantID, 10),
			Detail: detail, TraceID: traceID, JobID: &enq.ID})
		return err
	})
	return id, err
}

// ReconcilePayload is the payload of payment.reconcile for a tenant.
func ReconcilePayload(tenantID int64) json.RawMessage {
	b, _ := json.Marshal(reconcilePayload{TenantID: tenantID})
	return b
}

// Billing reads a tenant's invoices and refunds (tenant-scoped, on the app
// pool) and the provider's charges for it.
func (s *Service) Billing(ctx context.Context, tenantID int64) (Billing, error) {
	var b Billing
	err := database.ReadTenantAll(ctx, s.app, tenantID,
		func(db database.Querier) (err error) {
			b.Invoices, err = listInvoices(ctx, db, tenantID, 100)
			return err
		},
		func(db database.Querier) (err error) {
			b.Refunds, err = listRefunds(ctx, db, tenantID, 100)
			return err
		})
	if err != nil {
		return b, fmt.Errorf("read billing of tenant %d: %w", tenantID, err)
	}
	if s.provider != nil {
		if b.Charges, err = s.provider.Charges(ctx, TenantRef(tenantID)); err != nil {
			b.ChargesErr = "The payment provider did not answer; charges are not shown."
		}
	}
	return b, nil
}
