-- The staff view of the outbox (internal/outboxconsole).

-- name: OutboxConsoleCounts :one
-- Bounded counts: each stops at @cap rows of its partial index, so the page
-- costs the same with ten messages or ten million.
SELECT (SELECT count(*) FROM (SELECT 1 FROM outbox_messages WHERE state = 'pending' LIMIT @cap::int) p)::bigint AS pending,
       (SELECT count(*) FROM (SELECT 1 FROM outbox_messages WHERE state = 'processing' LIMIT @cap::int) r)::bigint AS processing,
       (SELECT count(*) FROM (SELECT 1 FROM outbox_messages WHERE state = 'failed' LIMIT @cap::int) f)::bigint AS failed,
       coalesce((SELECT created_at FROM outbox_messages WHERE state = 'pending' ORDER BY id LIMIT 1), coalesce(sqlc.narg('now')::timestamptz, now()))::timestamptz AS oldest_pending,
       coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS now;

-- name: OutboxConsoleStatsSince :many
SELECT minute, sum(delivered)::bigint AS delivered, sum(failed)::bigint AS failed FROM outbox_stats_minute
 WHERE minute >= @since::timestamptz GROUP BY minute ORDER BY minute;

-- name: OutboxConsoleFailed :many
SELECT m.id, m.tenant_id, t.slug, m.event_type, m.aggregate_type, m.aggregate_id, m.attempts,
       coalesce(m.last_error, '')::text AS last_error, m.created_at
  FROM outbox_messages m JOIN tenants t ON t.id = m.tenant_id
 WHERE m.state = 'failed'
   AND (sqlc.narg('tenant_id')::bigint IS NULL OR m.tenant_id = sqlc.narg('tenant_id'))
 ORDER BY m.id DESC
 LIMIT @lim;

-- name: OutboxConsoleRetry :many
-- Failed messages back to pending with a fresh attempt budget, due now.
UPDATE outbox_messages m
   SET state = 'pending', attempts = 0, available_at = coalesce(sqlc.narg('now')::timestamptz, now())
  FROM (SELECT tenant_id, id FROM outbox_messages
         WHERE state = 'failed'
           AND (sqlc.narg('tenant_id')::bigint IS NULL OR tenant_id = sqlc.narg('tenant_id'))
           AND (sqlc.narg('id')::bigint IS NULL OR id = sqlc.narg('id'))
         ORDER BY id LIMIT @lim FOR UPDATE) s
 WHERE m.tenant_id = s.tenant_id AND m.id = s.id
RETURNING m.id, m.tenant_id, m.event_type;

-- name: OutboxConsoleTenantBySlug :one
SELECT id FROM tenants WHERE slug = @slug;

-- name: OutboxConsoleOtherReplicas :one
-- Other engines that heartbeated recently: replicas sharing this database.
SELECT count(*)::bigint FROM job_workers
 WHERE worker_id <> @worker_id::text
   AND last_heartbeat > coalesce(sqlc.narg('now')::timestamptz, now()) - interval '1 minute';

-- name: OutboxConsoleFailingEndpoints :many
-- Webhook endpoints of every tenant whose last attempt failed, the longest
-- failure runs first (from webhook_endpoints_failing_idx).
SELECT e.id, t.slug, e.url, e.enabled, coalesce(e.disabled_reason, '')::text AS disabled_reason,
       e.consecutive_failures, e.failing_since, e.breaker_open_until,
       coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS now
  FROM webhook_endpoints e JOIN tenants t ON t.id = e.tenant_id
 WHERE e.consecutive_failures > 0 AND e.deleted_at IS NULL
 ORDER BY e.consecutive_failures DESC, e.tenant_id, e.id
 LIMIT @lim;
