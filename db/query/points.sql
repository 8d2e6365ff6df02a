-- name: ProcessedMessageClaim :execrows
-- The atomic dedup claim: 1 row = first delivery, 0 = a repeat.
-- A concurrent claimer of the same id waits here until the first commits.
INSERT INTO processed_messages (tenant_id, consumer, message_id, processed_at)
VALUES (@tenant_id, @consumer, @message_id, coalesce(sqlc.narg('now')::timestamptz, now()))
ON CONFLICT (tenant_id, consumer, message_id) DO NOTHING;

-- name: PointsLedgerInsert :one
INSERT INTO points_ledger (tenant_id, customer, points, reason, message_id, created_at)
VALUES (@tenant_id, @customer, @points, @reason, @message_id, coalesce(sqlc.narg('now')::timestamptz, now()))
RETURNING *;

-- name: PointsBalanceAdd :one
INSERT INTO points_balances (tenant_id, customer, balance, updated_at)
VALUES (@tenant_id, @customer, @points, coalesce(sqlc.narg('now')::timestamptz, now()))
ON CONFLICT (tenant_id, customer) DO UPDATE
SET balance = points_balances.balance + EXCLUDED.balance, updated_at = EXCLUDED.updated_at
RETURNING *;

-- name: PointsBalanceGet :one
SELECT * FROM points_balances WHERE tenant_id = @tenant_id AND customer = @customer;

-- name: PointsLedgerListByCustomer :many
SELECT * FROM points_ledger WHERE tenant_id = @tenant_id AND customer = @customer ORDER BY id;
