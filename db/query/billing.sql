-- name: PlanGet :one
SELECT * FROM plans WHERE code = $1;

-- name: SubscriptionGet :one
SELECT * FROM subscriptions WHERE tenant_id = $1;

-- name: SubscriptionChangeInsert :one
INSERT INTO subscription_changes (tenant_id, from_plan, to_plan, changed_by, changed_at)
VALUES (@tenant_id, sqlc.narg('from_plan'), @to_plan, sqlc.narg('changed_by'), coalesce(sqlc.narg('now')::timestamptz, now()))
RETURNING *;

-- name: SubscriptionChangeList :many
SELECT * FROM subscription_changes WHERE tenant_id = $1 ORDER BY id DESC;

-- name: SubscriptionInsertNew :one
-- A tenant's first subscription; returns no row when one already exists
-- (the caller then locks and updates it). Waits for a concurrent first
-- insert instead of racing it.
INSERT INTO subscriptions (tenant_id, plan_code, status, current_period_start, current_period_end, updated_at)
SELECT @tenant_id, @plan_code, 'active', clock.at, clock.at + make_interval(days => @period_days::int), clock.at
FROM (SELECT coalesce(sqlc.narg('now')::timestamptz, now()) AS at) clock
ON CONFLICT (tenant_id) DO NOTHING
RETURNING *;

-- name: SubscriptionGetForUpdate :one
SELECT * FROM subscriptions WHERE tenant_id = $1 FOR UPDATE;

-- name: SubscriptionChangePlan :one
-- A plan change or renewal starts a fresh period from now.
UPDATE subscriptions SET plan_code = @plan_code, status = 'active',
    current_period_start = clock.at,
    current_period_end = clock.at + make_interval(days => @period_days::int),
    updated_at = clock.at
FROM (SELECT coalesce(sqlc.narg('now')::timestamptz, now()) AS at) clock
WHERE tenant_id = @tenant_id
RETURNING subscriptions.*;

-- name: SubscriptionSweep :many
-- Recomputes status from the period at now (active before period end,
-- grace for grace_days after, expired later), writes only real changes and
-- appends each to subscription_status_changes. The rows are locked first,
-- so a concurrent sweep sees the new status and records nothing twice.
-- A NULL tenant_id sweeps every tenant the role can see.
WITH clock AS (SELECT coalesce(sqlc.narg('now')::timestamptz, now()) AS at),
due AS (
    SELECT s.tenant_id, s.status AS from_status, clock.at,
        CASE WHEN clock.at < s.current_period_end THEN 'active'
             WHEN clock.at < s.current_period_end + make_interval(days => @grace_days::int) THEN 'grace'
             ELSE 'expired' END AS to_status
    FROM subscriptions s CROSS JOIN clock
    WHERE s.status <> 'cancelled'
      AND (sqlc.narg('tenant_id')::bigint IS NULL OR s.tenant_id = sqlc.narg('tenant_id')::bigint)
    FOR UPDATE OF s
),
changed AS (
    UPDATE subscriptions s SET status = due.to_status, updated_at = due.at
    FROM due
    WHERE s.tenant_id = due.tenant_id AND due.from_status <> due.to_status
    RETURNING s.tenant_id, due.from_status, due.to_status, due.at
)
INSERT INTO subscription_status_changes (tenant_id, from_status, to_status, changed_at, job_id)
SELECT changed.tenant_id, changed.from_status, changed.to_status, changed.at, sqlc.narg('job_id')::bigint
FROM changed
RETURNING *;

-- name: SubscriptionStatusChangeList :many
SELECT * FROM subscription_status_changes WHERE tenant_id = $1 ORDER BY id;
