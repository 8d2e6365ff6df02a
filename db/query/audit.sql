-- name: AuditHeadLock :one
-- Locks the tenant's head for the rest of the transaction and, in the same
-- round trip, fixes the event's time (the clock's, else the database's) and
-- the detail's canonical jsonb text, both exactly as they will be stored.
SELECT seq, hash,
       coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS occurred_at,
       (sqlc.arg('detail')::jsonb)::text AS detail_text
FROM audit_heads
WHERE tenant_id = sqlc.arg('tenant_id')
FOR UPDATE;

-- name: AuditHeadCreate :exec
INSERT INTO audit_heads (tenant_id, seq, hash)
VALUES (sqlc.arg('tenant_id'), 0, sqlc.arg('genesis'))
ON CONFLICT (tenant_id) DO NOTHING;

-- name: AuditHeadGet :one
SELECT seq, hash FROM audit_heads WHERE tenant_id = $1;

-- name: AuditHeadLockMany :many
-- Locks several tenants' heads in tenant order (a fixed order cannot deadlock).
SELECT tenant_id, seq, hash FROM audit_heads
WHERE tenant_id = ANY(sqlc.arg('tenant_ids')::bigint[])
ORDER BY tenant_id
FOR UPDATE;

-- name: AuditEventInsert :one
INSERT INTO audit_events (
    tenant_id, seq, actor_kind, actor_id, action, entity, entity_id,
    detail, occurred_at, trace_id, job_id, prev_hash, hash
) VALUES (
    sqlc.arg('tenant_id'), sqlc.arg('seq'), sqlc.arg('actor_kind'), sqlc.narg('actor_id'),
    sqlc.arg('action'), sqlc.arg('entity'), sqlc.arg('entity_id'),
    sqlc.arg('detail')::jsonb, sqlc.arg('occurred_at'), sqlc.arg('trace_id'), sqlc.narg('job_id'),
    sqlc.arg('prev_hash'), sqlc.arg('hash')
)
RETURNING id;

-- name: AuditEventInsertBatch :execrows
-- Bulk load for large-data mode: COPY is refused under forced row-level
-- security, so rows arrive as parallel arrays. 0 in actor_ids/job_ids
-- stands for NULL.
INSERT INTO audit_events (
    tenant_id, seq, actor_kind, actor_id, action, entity, entity_id,
    detail, occurred_at, trace_id, job_id, prev_hash, hash
)
SELECT unnest(sqlc.arg('tenant_ids')::bigint[]), unnest(sqlc.arg('seqs')::bigint[]),
       unnest(sqlc.arg('actor_kinds')::text[]), NULLIF(unnest(sqlc.arg('actor_ids')::bigint[]), 0),
       unnest(sqlc.arg('actions')::text[]), unnest(sqlc.arg('entities')::text[]),
       unnest(sqlc.arg('entity_ids')::text[]), unnest(sqlc.arg('details')::text[])::jsonb,
       unnest(sqlc.arg('occurred_ats')::timestamptz[]), unnest(sqlc.arg('trace_ids')::text[]),
       NULLIF(unnest(sqlc.arg('job_ids')::bigint[]), 0), unnest(sqlc.arg('prev_hashes')::bytea[]),
       unnest(sqlc.arg('hashes')::bytea[]);

-- name: AuditEventTimeline :many
-- Newest first, keyset on seq (never OFFSET). Each filter is optional.
SELECT tenant_id, seq, id, actor_kind, actor_id, action, entity, entity_id,
       detail, occurred_at, trace_id, job_id, prev_hash, hash
FROM audit_events
WHERE tenant_id = sqlc.arg('tenant_id')
  AND (sqlc.narg('before_seq')::bigint IS NULL OR seq < sqlc.narg('before_seq')::bigint)
  AND (sqlc.narg('action')::text IS NULL OR action = sqlc.narg('action')::text)
  AND (sqlc.narg('entity')::text IS NULL OR entity = sqlc.narg('entity')::text)
  AND (sqlc.narg('entity_id')::text IS NULL OR entity_id = sqlc.narg('entity_id')::text)
  AND (sqlc.narg('actor_kind')::text IS NULL OR actor_kind = sqlc.narg('actor_kind')::text)
  AND (sqlc.narg('actor_id')::bigint IS NULL OR actor_id = sqlc.narg('actor_id')::bigint)
  AND (sqlc.narg('trace_id')::text IS NULL OR trace_id = sqlc.narg('trace_id')::text)
  AND (sqlc.narg('job_id')::bigint IS NULL OR job_id = sqlc.narg('job_id')::bigint)
  AND (sqlc.narg('from_time')::timestamptz IS NULL OR occurred_at >= sqlc.narg('from_time')::timestamptz)
  AND (sqlc.narg('to_time')::timestamptz IS NULL OR occurred_at < sqlc.narg('to_time')::timestamptz)
ORDER BY seq DESC
LIMIT sqlc.arg('lim');

-- name: AuditEventTimelineByTime :many
-- The timeline filtered by a date range: newest first by time, through
-- audit_events_time_idx (tenant_id, occurred_at, seq), so a far-back range
-- reads its own events and not every newer one (ordered by seq, the
-- planner walks the primary key backwards from the head and filters on the
-- time). Within a tenant time almost always follows seq (an event's time
-- is its transaction's start), so the order is the usual one.
-- Keyset on (occurred_at, seq): the cursor is still a seq, whose time is
-- read by primary key. The other filters are as in AuditEventTimeline.
SELECT e.tenant_id, e.seq, e.id, e.actor_kind, e.actor_id, e.action, e.entity, e.entity_id,
       e.detail, e.occurred_at, e.trace_id, e.job_id, e.prev_hash, e.hash
FROM audit_events e
WHERE e.tenant_id = sqlc.arg('tenant_id')
  AND (sqlc.narg('from_time')::timestamptz IS NULL OR e.occurred_at >= sqlc.narg('from_time')::timestamptz)
  AND (sqlc.narg('to_time')::timestamptz IS NULL OR e.occurred_at < sqlc.narg('to_time')::timestamptz)
  AND (sqlc.narg('before_seq')::bigint IS NULL
       OR (e.occurred_at, e.seq) < (SELECT b.occurred_at, b.seq FROM audit_events b
                                     WHERE b.tenant_id = sqlc.arg('tenant_id') AND b.seq = sqlc.narg('before_seq')::bigint))
  AND (sqlc.narg('action')::text IS NULL OR e.action = sqlc.narg('action')::text)
  AND (sqlc.narg('entity')::text IS NULL OR e.entity = sqlc.narg('entity')::text)
  AND (sqlc.narg('entity_id')::text IS NULL OR e.entity_id = sqlc.narg('entity_id')::text)
  AND (sqlc.narg('actor_kind')::text IS NULL OR e.actor_kind = sqlc.narg('actor_kind')::text)
  AND (sqlc.narg('actor_id')::bigint IS NULL OR e.actor_id = sqlc.narg('actor_id')::bigint)
  AND (sqlc.narg('trace_id')::text IS NULL OR e.trace_id = sqlc.narg('trace_id')::text)
  AND (sqlc.narg('job_id')::bigint IS NULL OR e.job_id = sqlc.narg('job_id')::bigint)
ORDER BY e.occurred_at DESC, e.seq DESC
LIMIT sqlc.arg('lim');

-- name: AuditEventScan :many
-- Oldest first, keyset on seq, for verification and export batches.
SELECT tenant_id, seq, id, actor_kind, actor_id, action, entity, entity_id,
       detail::text AS detail_text, occurred_at, trace_id, job_id, prev_hash, hash
FROM audit_events
WHERE tenant_id = sqlc.arg('tenant_id')
  AND seq > sqlc.arg('after_seq')
  AND seq <= sqlc.arg('through_seq')
  AND (sqlc.narg('action')::text IS NULL OR action = sqlc.narg('action')::text)
  AND (sqlc.narg('entity')::text IS NULL OR entity = sqlc.narg('entity')::text)
  AND (sqlc.narg('entity_id')::text IS NULL OR entity_id = sqlc.narg('entity_id')::text)
  AND (sqlc.narg('actor_kind')::text IS NULL OR actor_kind = sqlc.narg('actor_kind')::text)
  AND (sqlc.narg('actor_id')::bigint IS NULL OR actor_id = sqlc.narg('actor_id')::bigint)
  AND (sqlc.narg('trace_id')::text IS NULL OR trace_id = sqlc.narg('trace_id')::text)
  AND (sqlc.narg('job_id')::bigint IS NULL OR job_id = sqlc.narg('job_id')::bigint)
  AND (sqlc.narg('from_time')::timestamptz IS NULL OR occurred_at >= sqlc.narg('from_time')::timestamptz)
  AND (sqlc.narg('to_time')::timestamptz IS NULL OR occurred_at < sqlc.narg('to_time')::timestamptz)
ORDER BY seq
LIMIT sqlc.arg('lim');

-- name: AuditEventChain :many
-- Oldest first, keyset on seq, no filters: the verification walk (a plain
-- primary-key range scan whatever plan the server caches).
SELECT tenant_id, seq, id, actor_kind, actor_id, action, entity, entity_id,
       detail::text AS detail_text, occurred_at, trace_id, job_id, prev_hash, hash
FROM audit_events
WHERE tenant_id = sqlc.arg('tenant_id')
  AND seq > sqlc.arg('after_seq')
  AND seq <= sqlc.arg('through_seq')
ORDER BY seq
LIMIT sqlc.arg('lim');

-- name: AuditEventLastSeq :one
-- Highest stored sequence number of a tenant (0 when none); verification
-- compares it with the head to notice rows beyond the head.
SELECT coalesce(max(seq), 0)::bigint FROM audit_events WHERE tenant_id = $1;

-- name: AuditEventEntityHistory :many
-- One entity's story in one tenant, oldest first (its history page).
SELECT tenant_id, seq, id, actor_kind, actor_id, action, entity, entity_id,
       detail, occurred_at, trace_id, job_id, prev_hash, hash
FROM audit_events
WHERE tenant_id = $1 AND entity = $2 AND entity_id = $3
ORDER BY seq
LIMIT sqlc.arg('lim');

-- name: AuditEventSearch :many
-- Forensics by trace id or job id (globally indexed), optionally within one
-- tenant; newest first by id, keyset on id. Cross-tenant only through the
-- system pool (row-level security limits jejak_app to its tenant anyway).
-- The caller sets at least one of trace_id and job_id.
SELECT tenant_id, seq, id, actor_kind, actor_id, action, entity, entity_id,
       detail, occurred_at, trace_id, job_id, prev_hash, hash
FROM audit_events
WHERE (sqlc.narg('trace_id')::text IS NULL OR trace_id = sqlc.narg('trace_id')::text)
  AND (sqlc.narg('job_id')::bigint IS NULL OR job_id = sqlc.narg('job_id')::bigint)
  AND (sqlc.narg('tenant_id')::bigint IS NULL OR tenant_id = sqlc.narg('tenant_id')::bigint)
  AND (sqlc.narg('before_id')::bigint IS NULL OR id < sqlc.narg('before_id')::bigint)
ORDER BY id DESC
LIMIT sqlc.arg('lim');

-- name: AuditTenantIDs :many
-- Every tenant, for verifying all chains; the system tenant (staff
-- notifications) only once it has a chain (its endpoint disabled by a
-- receiver's 410 is audited there), so a routine run does not list it.
SELECT id FROM tenants t
 WHERE NOT t.is_system OR EXISTS (SELECT 1 FROM audit_heads h WHERE h.tenant_id = t.id)
 ORDER BY id;

-- name: AuditSeedMembers :many
-- Members of the given tenants, to act in generated large data.
SELECT tenant_id, user_id FROM memberships
WHERE tenant_id = ANY(sqlc.arg('tenant_ids')::bigint[])
ORDER BY tenant_id, user_id;

-- name: AuditSeedStaff :many
-- Staff users, to act in generated large data.
SELECT id FROM users WHERE staff_role IS NOT NULL ORDER BY id;

-- name: AuditAnalyze :exec
-- Fresh statistics after a bulk load, so the planner picks the read-path
-- indexes at once. Only the owner (or a superuser) may analyze; for other
-- roles PostgreSQL skips the table with a warning, not an error.
ANALYZE audit_events;
