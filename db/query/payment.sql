-- name: InvoiceInsert :one
INSERT INTO invoices (tenant_id, plan_code, amount_idr, created_at, created_by)
VALUES ($1, $2, $3, $4, $5)
RETURNING *;

-- name: InvoiceGet :one
SELECT * FROM invoices WHERE tenant_id = $1 AND id = $2;

-- name: InvoiceMarkPaid :one
UPDATE invoices SET status = 'paid', charge_ref = $3, paid_at = $4
 WHERE tenant_id = $1 AND id = $2 AND status <> 'paid'
RETURNING *;

-- name: InvoiceMarkFailed :exec
UPDATE invoices SET status = 'failed' WHERE tenant_id = $1 AND id = $2 AND status = 'open';

-- name: InvoiceList :many
SELECT * FROM invoices WHERE tenant_id = $1 ORDER BY id DESC LIMIT $2;

-- name: RefundInsert :one
-- ON CONFLICT: a charge is refunded once, however often reconciliation runs.
INSERT INTO payment_refunds (tenant_id, invoice_id, charge_ref, refund_ref, amount_idr, reason, created_at, job_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (tenant_id, charge_ref) DO NOTHING
RETURNING *;

-- name: RefundList :many
SELECT * FROM payment_refunds WHERE tenant_id = $1 ORDER BY id DESC LIMIT $2;

-- name: PlanPrice :one
SELECT price_idr FROM plans WHERE code = $1;

-- name: PaymentReconcileLock :exec
-- Serialises staff requests to reconcile one tenant (transaction-scoped).
SELECT pg_advisory_xact_lock(hashtextextended('payment.reconcile', @tenant_id::bigint));

-- name: PaymentReconcileActive :one
-- The tenant's payment.reconcile job that is queued or running, 0 when none.
SELECT coalesce(max(id), 0)::bigint AS id FROM jobs
 WHERE tenant_id = $1 AND kind = 'payment.reconcile' AND state IN ('pending', 'running');
