-- Tenant webhooks: endpoints, deliveries, attempts (internal/webhook).

-- name: WebhookEndpointInsert :one
INSERT INTO webhook_endpoints (tenant_id, url, events, secret, created_at, updated_at)
VALUES (@tenant_id, @url, @events::text[], @secret, coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now()))
RETURNING *;

-- name: WebhookEndpointList :many
-- A keyset page of a tenant's endpoints, newest first (@before = 0: the
-- first page): every endpoint is on some page.
SELECT * FROM webhook_endpoints
 WHERE tenant_id = @tenant_id AND (@before::bigint = 0 OR id < @before::bigint)
 ORDER BY id DESC LIMIT @lim::int;

-- name: WebhookEndpointLockTenant :exec
-- Serialises endpoint creation within a tenant, so the endpoint limit
-- holds against concurrent creations.
SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints', @tenant_id::bigint));

-- name: WebhookEndpointCount :one
SELECT count(*) FROM webhook_endpoints WHERE tenant_id = @tenant_id;

-- name: WebhookEndpointGet :one
SELECT * FROM webhook_endpoints WHERE tenant_id = @tenant_id AND id = @id;

-- name: WebhookEndpointSetEnabled :one
UPDATE webhook_endpoints
   SET enabled = @enabled, disabled_reason = sqlc.narg('disabled_reason'),
       updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
 WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: WebhookEndpointRotate :one
-- The old secret keeps signing until @overlap_until, beside the new one.
UPDATE webhook_endpoints
   SET previous_secret = secret, previous_secret_expires_at = @overlap_until::timestamptz,
       secret = @secret, updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
 WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: WebhookEndpointsMatching :many
SELECT id FROM webhook_endpoints
 WHERE tenant_id = @tenant_id AND enabled AND (@event_type::text = ANY(events) OR '*' = ANY(events))
 ORDER BY id;

-- name: WebhookDeliveryInsert :one
-- One delivery per (event, endpoint): a redelivered event inserts nothing
-- and gets the existing delivery back (inserted = false).
INSERT INTO webhook_deliveries (tenant_id, endpoint_id, event_id, event_type, body, next_attempt_at, created_at, updated_at)
VALUES (@tenant_id, @endpoint_id, @event_id, @event_type, @body,
        coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now()))
ON CONFLICT (tenant_id, endpoint_id, event_id) DO UPDATE SET updated_at = webhook_deliveries.updated_at
RETURNING id, (xmax = 0)::boolean AS inserted;

-- name: WebhookDeliveryForAttempt :one
SELECT d.id, d.tenant_id, d.endpoint_id, d.event_id, d.event_type, d.body, d.state, d.attempts,
       e.url, e.enabled, e.secret, e.previous_secret, e.previous_secret_expires_at
  FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id AND e.tenant_id = d.tenant_id
 WHERE d.tenant_id = @tenant_id AND d.id = @id;

-- name: WebhookAttemptInsert :exec
INSERT INTO webhook_attempts (tenant_id, delivery_id, attempt, attempted_at, status_code, latency_ms, response, error)
VALUES (@tenant_id, @delivery_id, @attempt, coalesce(sqlc.narg('now')::timestamptz, now()), sqlc.narg('status_code'), @latency_ms, @response, sqlc.narg('error'));

-- name: WebhookDeliveryUpdate :one
UPDATE webhook_deliveries
   SET state = @state, attempts = @attempts, last_status = sqlc.narg('last_status'), last_error = sqlc.narg('last_error'),
       next_attempt_at = sqlc.narg('next_attempt_at'), updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
 WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: WebhookDeliveryList :many
SELECT * FROM webhook_deliveries
 WHERE tenant_id = @tenant_id AND endpoint_id = @endpoint_id
 ORDER BY id DESC LIMIT @lim;

-- name: WebhookDeliveryGet :one
SELECT * FROM webhook_deliveries WHERE tenant_id = @tenant_id AND id = @id;

-- name: WebhookAttemptList :many
SELECT * FROM webhook_attempts
 WHERE tenant_id = @tenant_id AND delivery_id = ANY(@delivery_ids::bigint[])
 ORDER BY delivery_id DESC, attempt DESC;
