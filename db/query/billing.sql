-- name: PlanUpsert :exec
INSERT INTO plans (code, name, price_idr, max_projects) VALUES ($1, $2, $3, $4)
ON CONFLICT (code) DO UPDATE SET name = EXCLUDED.name, price_idr = EXCLUDED.price_idr, max_projects = EXCLUDED.max_projects;

-- name: PlanGet :one
SELECT * FROM plans WHERE code = $1;

-- name: SubscriptionGet :one
SELECT * FROM subscriptions WHERE tenant_id = $1;

-- name: SubscriptionUpsert :one
INSERT INTO subscriptions (tenant_id, plan_code, status, current_period_start, current_period_end, updated_at)
VALUES (@tenant_id, @plan_code, 'active', @period_start, @period_end, coalesce(sqlc.narg('now')::timestamptz, now()))
ON CONFLICT (tenant_id) DO UPDATE SET
    plan_code = EXCLUDED.plan_code, status = 'active',
    current_period_start = EXCLUDED.current_period_start,
    current_period_end = EXCLUDED.current_period_end,
    updated_at = EXCLUDED.updated_at
RETURNING *;

-- name: SubscriptionChangeInsert :one
INSERT INTO subscription_changes (tenant_id, from_plan, to_plan, changed_by, changed_at)
VALUES (@tenant_id, sqlc.narg('from_plan'), @to_plan, sqlc.narg('changed_by'), coalesce(sqlc.narg('now')::timestamptz, now()))
RETURNING *;

-- name: SubscriptionChangeList :many
SELECT * FROM subscription_changes WHERE tenant_id = $1 ORDER BY id DESC;

-- name: SubscriptionSetStatus :one
UPDATE subscriptions SET status = @status, updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE tenant_id = @tenant_id RETURNING *;
