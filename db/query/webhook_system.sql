-- The system tenant's staff endpoint (internal/webhook/system.go): alert
-- notifications go to a URL from the environment, kept in sync at start.

-- name: WebhookSystemTenant :one
-- The reserved tenant that owns staff notifications (db/schema/00060).
SELECT id FROM tenants WHERE is_system;

-- name: WebhookSystemLock :exec
-- Replicas starting together sync the staff endpoint one at a time.
SELECT pg_advisory_xact_lock(hashtext('jejak.alert_webhook'));

-- name: WebhookSystemEndpoint :one
-- The system tenant's endpoint (the oldest, should a second ever exist).
SELECT * FROM webhook_endpoints WHERE tenant_id = @tenant_id ORDER BY id LIMIT 1;

-- name: WebhookSystemEndpointSet :one
UPDATE webhook_endpoints
   SET url = @url, events = @events::text[], secret = @secret, enabled = @enabled,
       disabled_reason = sqlc.narg('disabled_reason'), updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
 WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: WebhookSystemLastDelivery :one
-- The staff endpoint's latest delivery, for the panel on /admin/alerts.
SELECT id, event_id, state, attempts, coalesce(last_status, 0)::int AS last_status,
       coalesce(last_error, '')::text AS last_error, updated_at
  FROM webhook_deliveries
 WHERE tenant_id = @tenant_id AND endpoint_id = @endpoint_id
 ORDER BY id DESC LIMIT 1;
