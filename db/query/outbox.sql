-- The outbox runtime: publish, claim, settle, reclaim, prune (internal/outbox).

-- name: OutboxInsert :one
-- The advisory lock on the aggregate is taken before the identity value is
-- drawn, so two transactions publishing for the same aggregate get ids in
-- commit order: the relay's "no older undelivered message" test can then
-- trust ids within an aggregate (ids in general are allocated before
-- commit, so a higher id may commit first). The message's trace is
-- indexed for the forensics search (outbox_traces) by the same statement,
-- as by OutboxInsertMany (migration 00160 says why).
WITH msg AS (
    INSERT INTO outbox_messages (tenant_id, event_type, aggregate_type, aggregate_id, payload, trace_id, created_at, available_at, requested_by)
    SELECT @tenant_id::bigint, @event_type::text, @aggregate_type::text, @aggregate_id::text, @payload, @trace_id,
           coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now()),
           sqlc.narg('requested_by')::bigint
      FROM (SELECT pg_advisory_xact_lock(727276, hashtext(concat(@tenant_id::bigint, ':', @aggregate_type::text, ':', @aggregate_id::text)))) AS aggregate_lock
    RETURNING id
), traced AS (
    INSERT INTO outbox_traces (trace_id, message_id, tenant_id, created_at)
    SELECT @trace_id, msg.id, @tenant_id::bigint, coalesce(sqlc.narg('now')::timestamptz, now()) FROM msg WHERE @trace_id <> ''
)
SELECT msg.id FROM msg;

-- name: OutboxInsertMany :exec
-- OutboxInsert for many messages of one tenant in one statement: the
-- aggregates' locks are all taken first (an InitPlan, in key order, so
-- two such statements cannot deadlock), then the rows get their ids in
-- the given order, so the i-th smallest id is the i-th message and its
-- trace the i-th trace id. (RETURNING gives ids only: jejak_app may read
-- no other column of outbox_messages.)
WITH msg AS (
    INSERT INTO outbox_messages (tenant_id, event_type, aggregate_type, aggregate_id, payload, trace_id, created_at, available_at, requested_by)
    SELECT @tenant_id::bigint, m.event_type, m.aggregate_type, m.aggregate_id, m.payload::jsonb, m.trace_id,
           coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now()),
           NULLIF(m.requested_by, 0)
      FROM (SELECT i AS ord, (@event_types::text[])[i] AS event_type, (@aggregate_types::text[])[i] AS aggregate_type,
                   (@aggregate_ids::text[])[i] AS aggregate_id, (@payloads::text[])[i] AS payload, (@trace_ids::text[])[i] AS trace_id,
                   (@requested_bys::bigint[])[i] AS requested_by
              FROM generate_subscripts(@event_types::text[], 1) AS i) m
     WHERE (SELECT count(pg_advisory_xact_lock(727276, hashtext(concat(@tenant_id::bigint, ':', a.aggregate_type, ':', a.aggregate_id))))
              FROM (SELECT DISTINCT (@aggregate_types::text[])[i] AS aggregate_type, (@aggregate_ids::text[])[i] AS aggregate_id
                      FROM generate_subscripts(@aggregate_types::text[], 1) AS i
                     ORDER BY 1, 2) a) >= 0
     ORDER BY m.ord
    RETURNING id
)
INSERT INTO outbox_traces (trace_id, message_id, tenant_id, created_at)
SELECT (@trace_ids::text[])[r.ord], r.id, @tenant_id::bigint, coalesce(sqlc.narg('now')::timestamptz, now())
  FROM (SELECT msg.id, row_number() OVER (ORDER BY msg.id) AS ord FROM msg) r
 WHERE (@trace_ids::text[])[r.ord] <> '';

-- name: OutboxClaim :many
-- outbox_claim (db/schema/00164) takes the claim's turn, picks the batch
-- with outbox_claimable (00032, 00163: due pending messages in id order,
-- each aggregate's waiting run) and marks it processing, all after the
-- turn: this statement's own snapshot, taken before the wait, reads
-- nothing but the tenants' slugs.
SELECT c.id, c.tenant_id, t.slug, c.event_type, c.aggregate_type, c.aggregate_id, c.payload, c.trace_id, c.created_at, c.attempts,
       c.requested_by
  FROM outbox_claim(@lim::int, coalesce(sqlc.narg('now')::timestamptz, now()), @worker::text) c
  JOIN tenants t ON t.id = c.tenant_id;

-- name: OutboxMarkDelivered :one
-- Marks a batch delivered and adds it to the minute's throughput in the
-- same statement: one commit per batch instead of two. The rows are found
-- by primary key (tenant_id, id) only (the relay holds each claimed
-- message's tenant): written as a plain "state = 'processing'", the test
-- let the planner AND in outbox_processing_idx, a scan of every reservation
-- in flight and of the dead entries earlier batches left there (the same
-- in OutboxMarkFailed and OutboxRelease).
WITH delivered AS (
    UPDATE outbox_messages m
       SET state = 'delivered', processed_at = coalesce(sqlc.narg('now')::timestamptz, now()), last_error = NULL
      FROM (SELECT unnest(@tenant_ids::bigint[]) AS tenant_id, unnest(@ids::bigint[]) AS id) b
     WHERE m.tenant_id = b.tenant_id AND m.id = b.id
       AND (m.state = 'processing') IS TRUE AND m.reserved_by = @worker::text
    RETURNING 1
), stats AS (
    INSERT INTO outbox_stats_minute (minute, shard, delivered)
    SELECT date_trunc('minute', coalesce(sqlc.narg('now')::timestamptz, now()), 'UTC'), stats_shard(), count(*)
      FROM delivered HAVING count(*) > 0
    ON CONFLICT (minute, shard) DO UPDATE SET delivered = outbox_stats_minute.delivered + EXCLUDED.delivered
    RETURNING delivered
)
SELECT (SELECT count(*) FROM delivered)::bigint AS marked;

-- name: OutboxMarkFailed :many
-- A failed publish goes back to pending after its backoff, or to failed
-- once it has used its attempts.
UPDATE outbox_messages m
   SET state = CASE WHEN m.attempts >= @max_attempts::int THEN 'failed' ELSE 'pending' END,
       last_error = f.err,
       available_at = coalesce(sqlc.narg('now')::timestamptz, now()) + make_interval(secs => f.delay),
       reserved_by = NULL, reserved_at = NULL
  FROM (SELECT unnest(@tenant_ids::bigint[]) AS tenant_id, unnest(@ids::bigint[]) AS id,
               unnest(@errors::text[]) AS err, unnest(@delays::float8[]) AS delay) f
 WHERE m.tenant_id = f.tenant_id AND m.id = f.id AND (m.state = 'processing') IS TRUE AND m.reserved_by = @worker::text
RETURNING m.id, m.state;

-- name: OutboxRelease :execrows
-- Claimed but never published (the relay is stopping): back to pending
-- without spending an attempt.
UPDATE outbox_messages m
   SET state = 'pending', attempts = greatest(m.attempts - 1, 0), reserved_by = NULL, reserved_at = NULL
  FROM (SELECT unnest(@tenant_ids::bigint[]) AS tenant_id, unnest(@ids::bigint[]) AS id) b
 WHERE m.tenant_id = b.tenant_id AND m.id = b.id
   AND (m.state = 'processing') IS TRUE AND m.reserved_by = @worker::text;

-- name: OutboxReclaim :execrows
-- Reservations older than the threshold belong to a relay that died (the
-- publish timeout is far shorter): back to pending.
UPDATE outbox_messages
   SET state = 'pending', reserved_by = NULL, reserved_at = NULL,
       last_error = 'reclaimed: relay ' || reserved_by || ' held it too long'
 WHERE state = 'processing'
   AND reserved_at < coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @older_than_seconds::float8);

-- name: OutboxPrune :execrows
-- Looks only at the @lim oldest delivered rows (a range of
-- outbox_delivered_idx) and deletes those delivered long enough ago. Rows
-- are delivered roughly in id order, so repeating until nothing is deleted
-- clears the old end of the table without reading its young part; pending
-- and failed rows are not in the index and stay.
DELETE FROM outbox_messages
 WHERE (tenant_id, id) IN (SELECT tenant_id, id FROM (
                SELECT tenant_id, id, processed_at FROM outbox_messages
                 WHERE state = 'delivered' ORDER BY id LIMIT @lim) oldest
               WHERE processed_at < coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @older_than_seconds::float8));

-- name: OutboxStatsAdd :exec
INSERT INTO outbox_stats_minute (minute, shard, delivered, failed)
VALUES (date_trunc('minute', coalesce(sqlc.narg('now')::timestamptz, now()), 'UTC'), stats_shard(), @delivered, @failed)
ON CONFLICT (minute, shard) DO UPDATE
   SET delivered = outbox_stats_minute.delivered + EXCLUDED.delivered,
       failed = outbox_stats_minute.failed + EXCLUDED.failed;

-- name: OutboxStatsPrune :execrows
DELETE FROM outbox_stats_minute
 WHERE minute < coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @older_than_seconds::float8);
