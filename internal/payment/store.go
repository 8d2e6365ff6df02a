package payment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/ptr"
	"github.com/jejakhq/jejak/internal/queries"
)

// ErrNoInvoice: no such invoice in the tenant.
var ErrNoInvoice = errors.New("invoice not found")

func planPrice(ctx context.Context, db database.Querier, plan string) (int64, error) {
	p, err := queries.New(db).PlanPrice(ctx, plan)
	if err != nil {
		return 0, fmt.Errorf("price of plan %s: %w", plan, err)
	}
	return p, nil
}

func insertInvoice(ctx context.Context, db database.Querier, tenantID int64, plan string, amount int64, at time.Time, by *int64) (Invoice, error) {
	r, err := queries.New(db).InvoiceInsert(ctx, queries.InvoiceInsertParams{TenantID: tenantID, PlanCode: plan, AmountIdr: amount, CreatedAt: at, CreatedBy: by})
	if err != nil {
		return Invoice{}, fmt.Errorf("create invoice: %w", err)
	}
	return invoice(r), nil
}

func getInvoice(ctx context.Context, db database.Querier, tenantID, id int64) (Invoice, error) {
	r, err := queries.New(db).InvoiceGet(ctx, queries.InvoiceGetParams{TenantID: tenantID, ID: id})
	if errors.Is(err, pgx.ErrNoRows) {
		return Invoice{}, ErrNoInvoice
	}
	if err != nil {
		return Invoice{}, fmt.Errorf("read invoice %d: %w", id, err)
	}
	return invoice(r), nil
}

// markPaid reports false when the invoice was paid already.
func markPaid(ctx context.Context, db database.Querier, tenantID, id int64, charge string, at time.Time) (bool, error) {
	_, err := queries.New(db).InvoiceMarkPaid(ctx, queries.InvoiceMarkPaidParams{TenantID: tenantID, ID: id, ChargeRef: &charge, PaidAt: &at})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func markFailed(ctx context.Context, db database.Querier, tenantID, id int64) error {
	return queries.New(db).InvoiceMarkFailed(ctx, queries.InvoiceMarkFailedParams{TenantID: tenantID, ID: id})
}

// insertRefund reports false when the charge was refunded before (the
// unique charge_ref makes a refund happen once).
func insertRefund(ctx context.Context, db database.Querier, tenantID int64, r RefundRecord, at time.Time, jobID *int64) (bool, error) {
	_, err := queries.New(db).RefundInsert(ctx, queries.RefundInsertParams{TenantID: tenantID, InvoiceID: r.InvoiceID,
		ChargeRef: r.ChargeRef, RefundRef: r.RefundRef, AmountIdr: r.Amount, Reason: r.Reason, CreatedAt: at, JobID: jobID})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func listInvoices(ctx context.Context, db database.Querier, tenantID int64, limit int) ([]Invoice, error) {
	rows, err := queries.New(db).InvoiceList(ctx, queries.InvoiceListParams{TenantID: tenantID, Limit: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]Invoice, len(rows))
	for i, r := range rows {
		out[i] = invoice(r)
	}
	return out, nil
}

func listRefunds(ctx context.Context, db database.Querier, tenantID int64, limit int) ([]RefundRecord, error) {
	rows, err := queries.New(db).RefundList(ctx, queries.RefundListParams{TenantID: tenantID, Limit: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]RefundRecord, len(rows))
	for i, r := range rows {
		out[i] = RefundRecord{InvoiceID: r.InvoiceID, ChargeRef: r.ChargeRef, RefundRef: r.RefundRef,
			Amount: r.AmountIdr, Reason: r.Reason, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

func invoice(r queries.Invoice) Invoice {
	return Invoice{ID: r.ID, TenantID: r.TenantID, Plan: r.PlanCode, Amount: r.AmountIdr, Status: r.Status,
		ChargeRef: ptr.Value(r.ChargeRef), CreatedAt: r.CreatedAt, PaidAt: r.PaidAt}
}

// activeReconcile locks the tenant's reconcile requests for the rest of tx
// and returns its queued or running payment.reconcile job (0 when none).
func activeReconcile(ctx context.Context, db database.Querier, tenantID int64) (int64, error) {
	q := queries.New(db)
	if err := q.PaymentReconcileLock(ctx, tenantID); err != nil {
		return 0, fmt.Errorf("lock reconcile requests: %w", err)
	}
	id, err := q.PaymentReconcileActive(ctx, tenantID)
	if err != nil {
		return 0, fmt.Errorf("find active reconcile: %w", err)
	}
	return id, nil
}
