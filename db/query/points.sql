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

-- name: PointsClaimMany :many
-- The dedup claims and ledger rows of many awards of one tenant in one
-- statement. A message id given twice counts once, as its first
-- occurrence. Claims are written in key order, so batches of one tenant
-- racing on other replicas lock rows in the same order and cannot
-- deadlock. Returns the message ids applied now (not those processed
-- before); their balances are PointsBalanceAddMany's, a statement of its
-- own so that it can be the transaction's last.
WITH input AS (
    SELECT DISTINCT ON (message_id) message_id, customer, points, reason
      FROM (SELECT i, (@message_ids::text[])[i] AS message_id, (@customers::text[])[i] AS customer,
                   (@points::bigint[])[i] AS points, (@reasons::text[])[i] AS reason
              FROM generate_subscripts(@message_ids::text[], 1) AS i) t
     ORDER BY message_id, i
), claim AS (
    INSERT INTO processed_messages (tenant_id, consumer, message_id, processed_at)
    SELECT @tenant_id, @consumer, message_id, coalesce(sqlc.narg('now')::timestamptz, now()) FROM input
     ORDER BY message_id
    ON CONFLICT (tenant_id, consumer, message_id) DO NOTHING
    RETURNING message_id, processed_at
), applied AS (
    SELECT i.message_id, i.customer, i.points, i.reason, c.processed_at
      FROM input i JOIN claim c USING (message_id)
), ledger AS (
    INSERT INTO points_ledger (tenant_id, customer, points, reason, message_id, created_at)
    SELECT @tenant_id, customer, points, reason, message_id, processed_at FROM applied ORDER BY message_id
)
SELECT message_id::text FROM applied;

-- name: PointsBalanceAddMany :exec
-- Adds points to many customers' balances of one tenant (a customer given
-- twice gets the sum), in key order like PointsClaimMany's claims.
INSERT INTO points_balances (tenant_id, customer, balance, updated_at)
SELECT @tenant_id, customer, sum(points), coalesce(sqlc.narg('now')::timestamptz, now())
  FROM (SELECT (@customers::text[])[i] AS customer, (@points::bigint[])[i] AS points
          FROM generate_subscripts(@customers::text[], 1) AS i) a
 GROUP BY customer ORDER BY customer
ON CONFLICT (tenant_id, customer) DO UPDATE
SET balance = points_balances.balance + EXCLUDED.balance, updated_at = EXCLUDED.updated_at;
