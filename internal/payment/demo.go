package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/sensitive"
)

// DemoDoubleCharge stages the classic double charge for the demo: an
// invoice for plan, charged at the provider, the answer "lost", charged
// again by the retry (a provider that did not deduplicate it), the invoice
// paid with the first charge; then it queues payment.reconcile, which the
// workers run to detect and refund the duplicate. It returns the invoice
// id and the reconcile job's id.
func (s *Service) DemoDoubleCharge(ctx context.Context, tenantID int64, plan, traceID string) (int64, int64, error) {
	if s.provider == nil {
		return 0, 0, fmt.Errorf("demo double charge: no payment provider")
	}
	var inv Invoice
	err := database.InTx(ctx, s.system, func(tx pgx.Tx) error {
		price, err := planPrice(ctx, tx, plan)
		if err != nil {
			return err
		}
		now, err := sensitive.Now(ctx, tx, s.clock)
		if err != nil {
			return err
		}
		if inv, err = insertInvoice(ctx, tx, tenantID, plan, price, now, nil); err != nil {
			return err
		}
		return s.event(ctx, tx, tenantID, "invoice.created", "invoice", inv.ID, traceID, nil,
			map[string]any{"plan": plan, "amount_idr": price})
	})
	if err != nil {
		return 0, 0, err
	}
	req := ChargeRequest{Amount: inv.Amount, Currency: "IDR", Tenant: TenantRef(tenantID), Invoice: InvoiceRef(inv.ID)}
	req.IdempotencyKey = "invoice:" + strconv.FormatInt(inv.ID, 10)
	first, err := s.provider.Charge(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	req.IdempotencyKey += ":retry" // the retry the provider did not recognise
	if _, err := s.provider.Charge(ctx, req); err != nil {
		return 0, 0, err
	}
	var jobID int64
	err = database.InTx(ctx, s.system, func(tx pgx.Tx) error {
		now, err := sensitive.Now(ctx, tx, s.clock)
		if err != nil {
			return err
		}
		if _, err := markPaid(ctx, tx, tenantID, inv.ID, first.ID, now); err != nil {
			return err
		}
		if err := s.event(ctx, tx, tenantID, "payment.charged", "invoice", inv.ID, traceID, nil,
			map[string]any{"charge": first.ID, "amount_idr": first.Amount, "note": "the first answer timed out; the retry charged again"}); err != nil {
			return err
		}
		payload, _ := json.Marshal(reconcilePayload{TenantID: tenantID})
		enq, err := s.jobs.Enqueue(ctx, tx, job.EnqueueParams{TenantID: tenantID, Kind: ReconcileKind, Payload: payload, TraceID: traceID})
		jobID = enq.ID
		return err
	})
	return inv.ID, jobID, err
}
