-- Tenant webhooks: endpoints, deliveries, attempts (internal/webhook).

-- name: WebhookEndpointInsert :one
INSERT INTO webhook_endpoints (tenant_id, url, events, secret, ordered, created_at, updated_at)
VALUES (@tenant_id, @url, @events::text[], @secret, @ordered, coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now()))
RETURNING *;

-- name: WebhookEndpointList :many
-- A keyset page of a tenant's endpoints, newest first (@before = 0: the
-- first page): every endpoint is on some page.
SELECT * FROM webhook_endpoints
 WHERE tenant_id = @tenant_id AND deleted_at IS NULL AND (@before::bigint = 0 OR id < @before::bigint)
 ORDER BY id DESC LIMIT @lim::int;

-- name: WebhookEndpointLockTenant :exec
-- Serialises endpoint creation within a tenant, so the endpoint limit
-- holds against concurrent creations.
SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints', @tenant_id::bigint));

-- name: WebhookEndpointCount :one
SELECT count(*) FROM webhook_endpoints WHERE tenant_id = @tenant_id AND deleted_at IS NULL;

-- name: WebhookEndpointGet :one
SELECT * FROM webhook_endpoints WHERE tenant_id = @tenant_id AND id = @id AND deleted_at IS NULL;

-- name: WebhookEndpointSetEnabled :one
-- Enabling starts afresh: the breaker closes and the failure run is
-- forgotten, so the next delivery is attempted at once.
UPDATE webhook_endpoints
   SET enabled = @enabled, disabled_reason = sqlc.narg('disabled_reason'),
       consecutive_failures = CASE WHEN @enabled THEN 0 ELSE consecutive_failures END,
       failing_since = CASE WHEN @enabled THEN NULL ELSE failing_since END,
       breaker_open_until = CASE WHEN @enabled THEN NULL ELSE breaker_open_until END,
       updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
 WHERE tenant_id = @tenant_id AND id = @id AND deleted_at IS NULL
RETURNING *;

-- name: WebhookEndpointDelete :one
-- The row stays (its deliveries and their attempts reference it) but
-- leaves every list, count and match, and its secret is forgotten.
UPDATE webhook_endpoints
   SET deleted_at = coalesce(sqlc.narg('now')::timestamptz, now()), enabled = false, disabled_reason = 'deleted',
       previous_secret = NULL, previous_secret_expires_at = NULL,
       updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
 WHERE tenant_id = @tenant_id AND id = @id AND deleted_at IS NULL
RETURNING *;

-- name: WebhookEndpointConfigure :one
UPDATE webhook_endpoints
   SET rate_limit = sqlc.narg('rate_limit'), ordered = @ordered, updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
 WHERE tenant_id = @tenant_id AND id = @id AND deleted_at IS NULL
RETURNING *;

-- name: WebhookEndpointClaimProbe :one
-- One delivery, on one replica, gets to probe a half-open breaker: the
-- winner pushes the breaker's end past its attempt so the others keep
-- waiting.
UPDATE webhook_endpoints
   SET breaker_open_until = @until::timestamptz
 WHERE tenant_id = @tenant_id AND id = @id AND breaker_open_until IS NOT NULL
   AND breaker_open_until <= @now::timestamptz
RETURNING id;

-- name: WebhookEndpointTakeRate :one
-- Counts one message in the endpoint's current one-second window, unless
-- the window is full (no row: wait for the next one). One row holds the
-- count, so every replica honours the same limit.
WITH o AS (SELECT @now::timestamptz AS at)
UPDATE webhook_endpoints e
   SET rate_window = CASE WHEN e.rate_window IS NULL OR e.rate_window <= o.at - interval '1 second'
                          THEN o.at ELSE e.rate_window END,
       rate_count = CASE WHEN e.rate_window IS NULL OR e.rate_window <= o.at - interval '1 second'
                         THEN 1 ELSE e.rate_count + 1 END
  FROM o
 WHERE e.tenant_id = @tenant_id AND e.id = @id
   AND (e.rate_limit IS NULL OR e.rate_window IS NULL OR e.rate_window <= o.at - interval '1 second'
        OR e.rate_count < e.rate_limit)
RETURNING e.id;

-- name: WebhookEndpointHourTotals :many
-- Attempt outcomes of the given endpoints since @since (at most 24 rows
-- per endpoint).
SELECT endpoint_id, sum(succeeded)::bigint AS succeeded, sum(failed)::bigint AS failed
  FROM webhook_endpoint_hours
 WHERE tenant_id = @tenant_id AND endpoint_id = ANY(@endpoint_ids::bigint[]) AND hour >= @since::timestamptz
 GROUP BY endpoint_id;

-- name: WebhookEndpointRotate :one
-- The old secret keeps signing until @overlap_until, beside the new one.
UPDATE webhook_endpoints
   SET previous_secret = secret, previous_secret_expires_at = @overlap_until::timestamptz,
       secret = @secret, updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
 WHERE tenant_id = @tenant_id AND id = @id AND deleted_at IS NULL
RETURNING *;

-- name: WebhookEndpointsMatching :many
-- The enabled endpoints that take each event of a batch (the i-th of
-- tenant_ids and event_types, i from 1): one statement for every event the
-- consumer holds, ordered by event, then endpoint.
SELECT x.i::int AS i, e.id
  FROM (SELECT i, (sqlc.arg('tenant_ids')::bigint[])[i] AS tenant_id, (sqlc.arg('event_types')::text[])[i] AS event_type
          FROM generate_subscripts(sqlc.arg('tenant_ids')::bigint[], 1) AS i) x
  JOIN webhook_endpoints e ON e.tenant_id = x.tenant_id
 WHERE e.enabled AND e.deleted_at IS NULL AND (x.event_type = ANY(e.events) OR '*' = ANY(e.events))
 ORDER BY x.i, e.id;

-- name: WebhookDeliveryInsert :many
-- One delivery per (event, endpoint), for any number of pairs in one
-- statement (an empty aggregate stands for none): a redelivered event
-- inserts nothing and gets its existing deliveries back (inserted =
-- false). A pair must not appear twice in one call. The deliveries get
-- their ids in the order given: an ordered endpoint delivers an
-- aggregate's events in delivery id order. A delivery to an endpoint whose
-- breaker is open is held from the start (held = true: it gets no job).
INSERT INTO webhook_deliveries (tenant_id, endpoint_id, event_id, event_type, body, aggregate, next_attempt_at, created_at, updated_at,
                                held_at, requested_by, trace_id)
SELECT d.tenant_id, d.endpoint_id, d.event_id, d.event_type, d.body, NULLIF(d.aggregate, ''),
       CASE WHEN e.held THEN NULL ELSE c.at END, c.at, c.at, CASE WHEN e.held THEN c.at END, NULLIF(d.requested_by, 0), d.trace_id
  FROM (SELECT generate_subscripts(sqlc.arg('tenant_ids')::bigint[], 1) AS n,
               unnest(sqlc.arg('tenant_ids')::bigint[]) AS tenant_id, unnest(sqlc.arg('endpoint_ids')::bigint[]) AS endpoint_id,
               unnest(sqlc.arg('event_ids')::bigint[]) AS event_id, unnest(sqlc.arg('event_types')::text[]) AS event_type,
               unnest(sqlc.arg('bodies')::text[]) AS body, unnest(sqlc.arg('aggregates')::text[]) AS aggregate,
               unnest(sqlc.arg('requested_bys')::bigint[]) AS requested_by, unnest(sqlc.arg('trace_ids')::text[]) AS trace_id) d
  CROSS JOIN (SELECT coalesce(sqlc.narg('now')::timestamptz, now()) AS at) c
  CROSS JOIN LATERAL (SELECT coalesce(x.breaker_open_until > c.at, false) AS held FROM webhook_endpoints x
                       WHERE x.tenant_id = d.tenant_id AND x.id = d.endpoint_id) e
 ORDER BY d.n
ON CONFLICT (tenant_id, endpoint_id, event_id) DO UPDATE SET updated_at = webhook_deliveries.updated_at
RETURNING id, endpoint_id, event_id, (xmax = 0)::boolean AS inserted, (held_at IS NOT NULL)::boolean AS held;

-- name: WebhookDeliveryForAttempt :one
-- What an attempt needs, in one statement: the delivery, its endpoint, the
-- time (@now, or the database's), earlier_pending (the endpoint keeps
-- each aggregate's order and an earlier delivery of this one's aggregate
-- is unfinished) and held_waiting (the endpoint has held deliveries, one
-- probe of the held index, which a success then releases one by one).
SELECT d.id, d.tenant_id, d.endpoint_id, d.event_id, d.event_type, d.body, d.state, d.attempts,
       d.aggregate, e.url, e.enabled, e.secret, e.previous_secret, e.previous_secret_expires_at,
       (e.deleted_at IS NOT NULL)::boolean AS deleted, e.consecutive_failures, e.failing_since, e.breaker_open_until,
       e.rate_limit, e.ordered,
       coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS db_now,
       (CASE WHEN e.ordered AND d.aggregate IS NOT NULL AND d.state = 'pending'
             THEN EXISTS (SELECT 1 FROM webhook_deliveries p
                           WHERE p.tenant_id = d.tenant_id AND p.endpoint_id = d.endpoint_id
                             AND p.aggregate = d.aggregate AND p.state = 'pending' AND p.id < d.id)
             ELSE false END)::boolean AS earlier_pending,
       EXISTS (SELECT 1 FROM webhook_deliveries h
                WHERE h.tenant_id = d.tenant_id AND h.endpoint_id = d.endpoint_id AND h.held_at IS NOT NULL)::boolean AS held_waiting
  FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id AND e.tenant_id = d.tenant_id
 WHERE d.tenant_id = @tenant_id AND d.id = @id;

-- name: WebhookAttemptRecord :one
-- Records one attempt of a delivery and what it did to the endpoint, in
-- one statement (one round trip): the attempt's row; its outcome in the
-- hour's tally, for the 24 h success rate, in the backend's shard of the
-- hour (readers sum the shards); and the breaker: a success closes it and
-- ends the failure run; the failure that reaches @threshold in a row (and
-- every one after it) opens it for a cool-down that doubles per further
-- failure, up to @max_cooldown_s. A success that finds the endpoint
-- healthy changes nothing on it and updates nothing (no row): the row is
-- not locked, so an endpoint's successful attempts commit side by side.
WITH o AS (SELECT @ok::boolean AS ok, @now::timestamptz AS at, @threshold::int AS threshold,
                  @cooldown_s::float8 AS cooldown_s, @max_cooldown_s::float8 AS max_cooldown_s),
attempt AS (
    INSERT INTO webhook_attempts (tenant_id, delivery_id, attempt, attempted_at, status_code, latency_ms, response, error)
    VALUES (@tenant_id::bigint, @delivery_id::bigint, @attempt::int, coalesce(sqlc.narg('attempted_at')::timestamptz, now()),
            sqlc.narg('status_code')::int, @latency_ms::int, @response::text, sqlc.narg('error')::text)
),
tally AS (
    INSERT INTO webhook_endpoint_hours (tenant_id, endpoint_id, hour, shard, succeeded, failed)
    SELECT @tenant_id::bigint, @endpoint_id::bigint, date_trunc('hour', o.at), stats_shard(),
           CASE WHEN o.ok THEN 1 ELSE 0 END, CASE WHEN o.ok THEN 0 ELSE 1 END
      FROM o
    ON CONFLICT (tenant_id, endpoint_id, hour, shard) DO UPDATE
       SET succeeded = webhook_endpoint_hours.succeeded + excluded.succeeded,
           failed = webhook_endpoint_hours.failed + excluded.failed
)
UPDATE webhook_endpoints e
   SET consecutive_failures = CASE WHEN o.ok THEN 0 ELSE e.consecutive_failures + 1 END,
       failing_since = CASE WHEN o.ok THEN NULL ELSE coalesce(e.failing_since, o.at) END,
       breaker_open_until = CASE
           WHEN o.ok THEN NULL
           WHEN e.consecutive_failures + 1 >= o.threshold THEN o.at + interval '1 second' *
               least(o.max_cooldown_s, o.cooldown_s * power(2, least(e.consecutive_failures + 1 - o.threshold, 20)))
           ELSE NULL END
  FROM o
 WHERE e.tenant_id = @tenant_id::bigint AND e.id = @endpoint_id::bigint
   AND NOT (o.ok AND e.consecutive_failures = 0 AND e.failing_since IS NULL AND e.breaker_open_until IS NULL)
RETURNING e.consecutive_failures, e.failing_since, e.breaker_open_until;

-- name: WebhookDeliveryUpdate :execrows
-- No row back: an attempt's settling sends it with COMMIT
-- (database.AtCommit), in one round trip.
UPDATE webhook_deliveries
   SET state = @state, attempts = @attempts, last_status = sqlc.narg('last_status'), last_error = sqlc.narg('last_error'),
       next_attempt_at = sqlc.narg('next_attempt_at'), updated_at = coalesce(sqlc.narg('now')::timestamptz, now()),
       held_at = NULL
 WHERE tenant_id = @tenant_id AND id = @id;

-- name: WebhookEndpointTakeHolder :one
-- Makes @delivery_id, with its job @job_id, the delivery whose job waits
-- out the endpoint's open breaker, unless another one already does
-- (webhook_holder_waits). The holder itself may name its next job (a
-- retry). No row: another delivery holds the breaker.
UPDATE webhook_endpoints e
   SET breaker_holder = @delivery_id::bigint, breaker_holder_job = @job_id::bigint
 WHERE e.tenant_id = @tenant_id AND e.id = @endpoint_id
   AND (e.breaker_holder = @delivery_id::bigint
        OR NOT webhook_holder_waits(e.tenant_id, e.breaker_holder, e.breaker_holder_job))
RETURNING e.id;

-- name: WebhookDeliveryHold :execrows
-- Holds a pending delivery: it keeps its state and attempts but has no job
-- until the held deliveries of its endpoint are released.
UPDATE webhook_deliveries
   SET held_at = @now::timestamptz, next_attempt_at = NULL, updated_at = @now::timestamptz
 WHERE tenant_id = @tenant_id AND id = @id AND state = 'pending' AND held_at IS NULL;

-- name: WebhookHeldRelease :many
-- Takes up to @lim of an endpoint's held deliveries off hold, oldest first;
-- the caller enqueues their jobs in the same transaction. Rows another
-- release has locked are skipped, and each is released once. The ids are
-- picked once, as an array (an InitPlan): as `IN (subquery)` the locking
-- subquery may be run again for each row, each run skipping the rows this
-- statement has just updated, and so take far more than @lim.
UPDATE webhook_deliveries d
   SET held_at = NULL, next_attempt_at = @now::timestamptz, updated_at = @now::timestamptz
 WHERE d.tenant_id = @tenant_id AND d.held_at IS NOT NULL AND d.id = ANY(ARRAY(
       SELECT x.id FROM webhook_deliveries x
        WHERE x.tenant_id = @tenant_id AND x.endpoint_id = @endpoint_id AND x.held_at IS NOT NULL
        ORDER BY x.id LIMIT @lim::int
          FOR UPDATE SKIP LOCKED))
RETURNING d.id, d.requested_by, d.trace_id;

-- name: WebhookHeldFail :execrows
-- Fails up to @lim of an endpoint's held deliveries, oldest first, as a
-- job would on finding its endpoint disabled or deleted; nothing once the
-- endpoint is enabled again. The ids are picked once, as WebhookHeldRelease
-- picks them.
UPDATE webhook_deliveries d
   SET state = 'failed', held_at = NULL, last_error = @last_error::text, next_attempt_at = NULL,
       updated_at = @now::timestamptz
 WHERE d.tenant_id = @tenant_id AND d.held_at IS NOT NULL
   AND EXISTS (SELECT 1 FROM webhook_endpoints e
                WHERE e.tenant_id = @tenant_id AND e.id = @endpoint_id AND NOT e.enabled)
   AND d.id = ANY(ARRAY(
       SELECT x.id FROM webhook_deliveries x
        WHERE x.tenant_id = @tenant_id AND x.endpoint_id = @endpoint_id AND x.held_at IS NOT NULL
        ORDER BY x.id LIMIT @lim::int
          FOR UPDATE SKIP LOCKED));

-- name: WebhookHeldCount :one
-- How many of an endpoint's deliveries are held, counted up to @cap (the
-- held index, at most @cap entries).
SELECT count(*) FROM (SELECT 1 FROM webhook_deliveries
                       WHERE tenant_id = @tenant_id AND endpoint_id = @endpoint_id AND held_at IS NOT NULL
                       LIMIT @cap::int) h;

-- name: WebhookHeldEndpoints :many
-- The endpoints with held deliveries (one probe of the held index per
-- endpoint, however many it holds), after (@after_tenant, @after_endpoint),
-- with what decides their fate: whether the endpoint still takes
-- deliveries, whether its breaker is open, and whether a holder is
-- waiting it out (webhook_holder_waits).
WITH RECURSIVE h AS (
    (SELECT x.tenant_id, x.endpoint_id FROM webhook_deliveries x
      WHERE x.held_at IS NOT NULL AND (x.tenant_id, x.endpoint_id) > (@after_tenant::bigint, @after_endpoint::bigint)
      ORDER BY x.tenant_id, x.endpoint_id LIMIT 1)
  UNION ALL
    SELECT n.tenant_id, n.endpoint_id FROM h, LATERAL (
        SELECT x.tenant_id, x.endpoint_id FROM webhook_deliveries x
         WHERE x.held_at IS NOT NULL AND (x.tenant_id, x.endpoint_id) > (h.tenant_id, h.endpoint_id)
         ORDER BY x.tenant_id, x.endpoint_id LIMIT 1) n
)
SELECT e.tenant_id, e.id, e.enabled, (e.deleted_at IS NOT NULL)::boolean AS deleted,
       (e.breaker_open_until IS NOT NULL)::boolean AS breaker_open,
       webhook_holder_waits(e.tenant_id, e.breaker_holder, e.breaker_holder_job)::boolean AS holder_waiting
  FROM h JOIN webhook_endpoints e ON e.tenant_id = h.tenant_id AND e.id = h.endpoint_id
 ORDER BY e.tenant_id, e.id
 LIMIT @lim::int;

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

-- name: WebhookDeliveryRecover :many
-- Puts an endpoint's failed deliveries made since @since back to pending
-- (at most @lim, oldest first); those already pending are not touched, so
-- asking twice sends each once.
UPDATE webhook_deliveries d
   SET state = 'pending', next_attempt_at = coalesce(sqlc.narg('now')::timestamptz, now()),
       updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
 WHERE d.tenant_id = @tenant_id AND d.id IN (
       SELECT x.id FROM webhook_deliveries x
        WHERE x.tenant_id = @tenant_id AND x.endpoint_id = @endpoint_id AND x.state = 'failed'
          AND x.created_at >= @since::timestamptz
        ORDER BY x.created_at, x.id LIMIT @lim::int)
RETURNING d.id, d.attempts;

-- name: WebhookEndpointReadableSecrets :many
-- Endpoints whose secrets are still stored readable (before sealing).
SELECT id, tenant_id, secret, previous_secret FROM webhook_endpoints
 WHERE secret LIKE 'whsec\_%' OR previous_secret LIKE 'whsec\_%';

-- name: WebhookEndpointSealSecret :execrows
-- Replaces a readable secret by its sealed form, unless it changed since
-- it was read (a rotation, or another replica sealing it).
UPDATE webhook_endpoints
   SET secret = @sealed, previous_secret = sqlc.narg('sealed_previous')
 WHERE tenant_id = @tenant_id AND id = @id AND secret = @readable;

-- name: WebhookOwnerEmails :many
-- Who hears that Jejak disabled an endpoint: the tenant's owners and
-- admins who can still sign in.
SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id
 WHERE m.tenant_id = @tenant_id AND m.role IN ('owner', 'admin') AND u.active
 ORDER BY u.email;

-- name: WebhookEndpointHoursPrune :execrows
-- Deletes attempt tallies of hours before @before (every tenant's: the
-- maintenance leader runs it through the cross-tenant pool).
DELETE FROM webhook_endpoint_hours WHERE hour < @before::timestamptz;
