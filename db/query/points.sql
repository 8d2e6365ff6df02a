-- name: PointsAward :one
-- An award in one statement (one round trip): the atomic dedup claim, then
-- the ledger row and the balance, written only when the claim inserted.
-- applied = 1 is the first delivery, 0 a repeat that wrote nothing. A
-- concurrent claimer of the same message id waits at the claim until the
-- first commits.
WITH claim AS (
    INSERT INTO processed_messages (tenant_id, consumer, message_id, processed_at)
    VALUES (@tenant_id, @consumer, @message_id::text, coalesce(sqlc.narg('now')::timestamptz, now()))
    ON CONFLICT (tenant_id, consumer, message_id) DO NOTHING
    RETURNING tenant_id, processed_at
), ledger AS (
    INSERT INTO points_ledger (tenant_id, customer, points, reason, message_id, created_at)
    SELECT tenant_id, @customer::text, @points::bigint, @reason::text, @message_id::text, processed_at FROM claim
), balance AS (
    INSERT INTO points_balances (tenant_id, customer, balance, updated_at)
    SELECT tenant_id, @customer::text, @points::bigint, processed_at FROM claim
    ON CONFLICT (tenant_id, customer) DO UPDATE
    SET balance = points_balances.balance + EXCLUDED.balance, updated_at = EXCLUDED.updated_at
)
SELECT count(*)::bigint AS applied FROM claim;

-- name: PointsBalanceGet :one
SELECT * FROM points_balances WHERE tenant_id = @tenant_id AND customer = @customer;

-- name: PointsLedgerListByCustomer :many
SELECT * FROM points_ledger WHERE tenant_id = @tenant_id AND customer = @customer ORDER BY id;
