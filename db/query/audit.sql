-- name: AuditEventInsert :one
-- One insert and nothing else: no head, no lock shared with the tenant's
-- other writers (the sealer orders the events later). An event is written
-- to audit_unsealed, one heap row and its primary key, and waits there for
-- the sealer, which moves it to audit_sealed (migration 00162 says why);
-- readers see both through the audit_events view. In the same round trip
-- it returns the event's id, its time (the clock's, else the database's)
-- and detail as jsonb stores them.
INSERT INTO audit_unsealed (
    tenant_id, actor_kind, actor_id, action, entity, entity_id,
    detail, occurred_at, trace_id, job_id
) VALUES (
    sqlc.arg('tenant_id'), sqlc.arg('actor_kind'), sqlc.narg('actor_id'),
    sqlc.arg('action'), sqlc.arg('entity'), sqlc.arg('entity_id'),
    sqlc.arg('detail')::jsonb, coalesce(sqlc.narg('now')::timestamptz, now()), sqlc.arg('trace_id'), sqlc.narg('job_id')
)
RETURNING event_id AS id, occurred_at, detail::text AS detail_text;

-- name: AuditEventAppendMany :exec
-- AuditEventInsert for writers that do not read the events back, for one
-- event or many in one statement (0 in actor_ids and job_ids stands for
-- NULL), ids in input order. Having no result, it can be queued to ride in
-- COMMIT's round trip (database.AtCommit).
INSERT INTO audit_unsealed (
    tenant_id, actor_kind, actor_id, action, entity, entity_id,
    detail, occurred_at, trace_id, job_id
)
SELECT (sqlc.arg('tenant_ids')::bigint[])[i], (sqlc.arg('actor_kinds')::text[])[i], NULLIF((sqlc.arg('actor_ids')::bigint[])[i], 0),
       (sqlc.arg('actions')::text[])[i], (sqlc.arg('entities')::text[])[i], (sqlc.arg('entity_ids')::text[])[i],
       (sqlc.arg('details')::text[])[i]::jsonb, coalesce(sqlc.narg('now')::timestamptz, now()),
       (sqlc.arg('trace_ids')::text[])[i], NULLIF((sqlc.arg('job_ids')::bigint[])[i], 0)
  FROM generate_subscripts(sqlc.arg('tenant_ids')::bigint[], 1) AS i
 ORDER BY i;

-- name: AuditEventAppendOne :exec
-- AuditEventAppendMany for a single event, the common case: one row of
-- VALUES costs PostgreSQL less than unpacking ten one-element arrays
-- (64 concurrent writers of one tenant, pgbench: about 5 % more audited
-- transactions a second). It rides with COMMIT the same way.
INSERT INTO audit_unsealed (
    tenant_id, actor_kind, actor_id, action, entity, entity_id,
    detail, occurred_at, trace_id, job_id
) VALUES (
    sqlc.arg('tenant_id'), sqlc.arg('actor_kind'), sqlc.narg('actor_id'),
    sqlc.arg('action'), sqlc.arg('entity'), sqlc.arg('entity_id'),
    sqlc.arg('detail')::jsonb, coalesce(sqlc.narg('now')::timestamptz, now()), sqlc.arg('trace_id'), sqlc.narg('job_id')
);

-- name: AuditEventInsertBatch :execrows
-- Bulk load for large-data mode: COPY is refused under forced row-level
-- security, so rows arrive as parallel arrays. 0 in actor_ids/job_ids
-- stands for NULL.
INSERT INTO audit_unsealed (
    tenant_id, actor_kind, actor_id, action, entity, entity_id,
    detail, occurred_at, trace_id, job_id
)
SELECT unnest(sqlc.arg('tenant_ids')::bigint[]),
       unnest(sqlc.arg('actor_kinds')::text[]), NULLIF(unnest(sqlc.arg('actor_ids')::bigint[]), 0),
       unnest(sqlc.arg('actions')::text[]), unnest(sqlc.arg('entities')::text[]),
       unnest(sqlc.arg('entity_ids')::text[]), unnest(sqlc.arg('details')::text[])::jsonb,
       unnest(sqlc.arg('occurred_ats')::timestamptz[]), unnest(sqlc.arg('trace_ids')::text[]),
       NULLIF(unnest(sqlc.arg('job_ids')::bigint[]), 0);

-- name: AuditEventTimeline :many
-- Newest first, keyset on id (never OFFSET). Each filter is optional. seq
-- is the event's leaf (0 while it waits for the sealer). The actor's name
-- and role, and the name of the user an event is about, come in the same
-- query (primary-key probes per row of the page), so a page is one round
-- trip. A name search reads AuditEventTimelineSearch instead.
SELECT sqlc.embed(e), coalesce(l.seq, 0)::bigint AS leaf_seq,
       coalesce(a.name, '')::text AS actor_name, coalesce(a.staff_role, '')::text AS actor_role,
       coalesce(u.name, '')::text AS entity_user_name
FROM audit_events e
LEFT JOIN audit_leaves l ON l.tenant_id = e.tenant_id AND l.event_id = e.id
LEFT JOIN users a ON a.id = e.actor_id
LEFT JOIN users u ON u.id = CASE WHEN e.entity = 'user' AND e.entity_id ~ '^[0-9]{1,18}$' THEN e.entity_id::bigint END
WHERE e.tenant_id = sqlc.arg('tenant_id')
  AND (sqlc.narg('before_id')::bigint IS NULL OR e.id < sqlc.narg('before_id')::bigint)
  AND (sqlc.narg('action')::text IS NULL OR e.action = sqlc.narg('action')::text)
  AND (sqlc.narg('actions')::text[] IS NULL OR e.action = ANY(sqlc.narg('actions')::text[]))
  AND (sqlc.narg('entity')::text IS NULL OR e.entity = sqlc.narg('entity')::text)
  AND (sqlc.narg('entity_id')::text IS NULL OR e.entity_id = sqlc.narg('entity_id')::text)
  AND (sqlc.narg('actor_kind')::text IS NULL OR e.actor_kind = sqlc.narg('actor_kind')::text)
  AND (sqlc.narg('actor_id')::bigint IS NULL OR e.actor_id = sqlc.narg('actor_id')::bigint)
  AND (sqlc.narg('trace_id')::text IS NULL OR e.trace_id = sqlc.narg('trace_id')::text)
  AND (sqlc.narg('job_id')::bigint IS NULL OR e.job_id = sqlc.narg('job_id')::bigint)
  AND (sqlc.narg('from_time')::timestamptz IS NULL OR e.occurred_at >= sqlc.narg('from_time')::timestamptz)
  AND (sqlc.narg('to_time')::timestamptz IS NULL OR e.occurred_at < sqlc.narg('to_time')::timestamptz)
ORDER BY e.id DESC
LIMIT sqlc.arg('lim');

-- name: AuditEventTimelineAll :many
-- The timeline without filters, the page read most: the same rows as
-- AuditEventTimeline with no filter set, as a statement of its own so it
-- is prepared once per connection and runs on one cached plan (a walk of
-- the primary key below the cursor). The filtered statement is planned
-- for every call (database.FreshPlans), and at 10M events planning it
-- cost PostgreSQL about as much as running it. before_id is always set
-- (the largest id for the first page), so one plan serves every page.
-- The page's leaves come from one walk of audit_leaves' (tenant_id,
-- event_id) index: the newest lim leaves below the cursor hold every leaf
-- of the page (its sealed events are the newest sealed ones below the
-- cursor, and there are at most lim of them), and they lie together in
-- the index and the heap, where a probe per event read four pages each.
SELECT sqlc.embed(e), coalesce(l.seq, 0)::bigint AS leaf_seq,
       coalesce(a.name, '')::text AS actor_name, coalesce(a.staff_role, '')::text AS actor_role,
       coalesce(u.name, '')::text AS entity_user_name
FROM audit_events e
LEFT JOIN (SELECT pl.event_id, pl.seq FROM audit_leaves pl
            WHERE pl.tenant_id = sqlc.arg('tenant_id') AND pl.event_id < sqlc.arg('before_id')::bigint
            ORDER BY pl.event_id DESC
            LIMIT sqlc.arg('lim')) l ON l.event_id = e.id
LEFT JOIN users a ON a.id = e.actor_id
LEFT JOIN users u ON u.id = CASE WHEN e.entity = 'user' AND e.entity_id ~ '^[0-9]{1,18}$' THEN e.entity_id::bigint END
WHERE e.tenant_id = sqlc.arg('tenant_id') AND e.id < sqlc.arg('before_id')::bigint
ORDER BY e.id DESC
LIMIT sqlc.arg('lim');

-- name: AuditEventTimelineChanged :many
-- What changed on a tenant's newest timeline page since a kept copy of it
-- was read at tree size since_size: the events not sealed yet and the
-- events sealed after that size, from from_id on (the copy's last row, or
-- 0 when the copy held every event), newest first, each as
-- AuditEventTimelineAll gives it. An event that became visible after the
-- copy was read is one of them whatever order the writers committed in:
-- it is still queued, or it was sealed since, with a seq above the size.
-- The ids are found first (the queue and the new leaves, both small: the
-- caller bounds them by the version it read), then their events by
-- primary key; a walk of the events probing the two sets for each one
-- costs several times more.
WITH changed AS MATERIALIZED (
    SELECT q.event_id FROM audit_unsealed q
     WHERE q.tenant_id = sqlc.arg('tenant_id') AND q.event_id >= sqlc.arg('from_id')::bigint
    UNION
    SELECT n.event_id FROM audit_leaves n
     WHERE n.tenant_id = sqlc.arg('tenant_id') AND n.seq > sqlc.arg('since_size')::bigint
       AND n.event_id >= sqlc.arg('from_id')::bigint
    ORDER BY 1 DESC
    LIMIT sqlc.arg('lim')
)
SELECT sqlc.embed(e), coalesce(l.seq, 0)::bigint AS leaf_seq,
       coalesce(a.name, '')::text AS actor_name, coalesce(a.staff_role, '')::text AS actor_role,
       coalesce(u.name, '')::text AS entity_user_name
FROM changed c
JOIN audit_events e ON e.tenant_id = sqlc.arg('tenant_id') AND e.id = c.event_id
LEFT JOIN audit_leaves l ON l.tenant_id = e.tenant_id AND l.event_id = e.id
LEFT JOIN users a ON a.id = e.actor_id
LEFT JOIN users u ON u.id = CASE WHEN e.entity = 'user' AND e.entity_id ~ '^[0-9]{1,18}$' THEN e.entity_id::bigint END
ORDER BY e.id DESC;

-- name: AuditEventTimelineByTime :many
-- The timeline filtered by a date range: newest first by time, through
-- audit_events_time_idx (tenant_id, occurred_at, id), so a far-back range
-- reads its own events and not every newer one. Keyset on (occurred_at,
-- id): the cursor is still an id, whose time is read by primary key. The
-- other filters are as in AuditEventTimeline.
SELECT sqlc.embed(e), coalesce(l.seq, 0)::bigint AS leaf_seq,
       coalesce(a.name, '')::text AS actor_name, coalesce(a.staff_role, '')::text AS actor_role,
       coalesce(u.name, '')::text AS entity_user_name
FROM audit_events e
LEFT JOIN audit_leaves l ON l.tenant_id = e.tenant_id AND l.event_id = e.id
LEFT JOIN users a ON a.id = e.actor_id
LEFT JOIN users u ON u.id = CASE WHEN e.entity = 'user' AND e.entity_id ~ '^[0-9]{1,18}$' THEN e.entity_id::bigint END
WHERE e.tenant_id = sqlc.arg('tenant_id')
  AND (sqlc.narg('from_time')::timestamptz IS NULL OR e.occurred_at >= sqlc.narg('from_time')::timestamptz)
  AND (sqlc.narg('to_time')::timestamptz IS NULL OR e.occurred_at < sqlc.narg('to_time')::timestamptz)
  AND (sqlc.narg('before_id')::bigint IS NULL
       OR (e.occurred_at, e.id) < (SELECT b.occurred_at, b.id FROM audit_events b
                                    WHERE b.tenant_id = sqlc.arg('tenant_id') AND b.id = sqlc.narg('before_id')::bigint))
  AND (sqlc.narg('action')::text IS NULL OR e.action = sqlc.narg('action')::text)
  AND (sqlc.narg('actions')::text[] IS NULL OR e.action = ANY(sqlc.narg('actions')::text[]))
  AND (sqlc.narg('entity')::text IS NULL OR e.entity = sqlc.narg('entity')::text)
  AND (sqlc.narg('entity_id')::text IS NULL OR e.entity_id = sqlc.narg('entity_id')::text)
  AND (sqlc.narg('actor_kind')::text IS NULL OR e.actor_kind = sqlc.narg('actor_kind')::text)
  AND (sqlc.narg('actor_id')::bigint IS NULL OR e.actor_id = sqlc.narg('actor_id')::bigint)
  AND (sqlc.narg('trace_id')::text IS NULL OR e.trace_id = sqlc.narg('trace_id')::text)
  AND (sqlc.narg('job_id')::bigint IS NULL OR e.job_id = sqlc.narg('job_id')::bigint)
ORDER BY e.occurred_at DESC, e.id DESC
LIMIT sqlc.arg('lim');

-- name: AuditEventTimelineSearch :many
-- The timeline with a name search: audit_search_ids finds the page's ids
-- (through the trigram index when the name is rare; see migration 00120),
-- then the events are read by primary key under row-level security, with
-- the same names as AuditEventTimeline. Newest first, keyset on id.
SELECT sqlc.embed(e), coalesce(l.seq, 0)::bigint AS leaf_seq,
       coalesce(a.name, '')::text AS actor_name, coalesce(a.staff_role, '')::text AS actor_role,
       coalesce(u.name, '')::text AS entity_user_name
FROM audit_search_ids(sqlc.arg('search')::text, sqlc.narg('before_id')::bigint, sqlc.arg('lim')::integer,
        sqlc.narg('actions')::text[], sqlc.narg('action')::text, sqlc.narg('entity')::text, sqlc.narg('entity_id')::text,
        sqlc.narg('actor_kind')::text, sqlc.narg('actor_id')::bigint, sqlc.narg('trace_id')::text, sqlc.narg('job_id')::bigint,
        sqlc.narg('from_time')::timestamptz, sqlc.narg('to_time')::timestamptz) AS s(id)
JOIN audit_events e ON e.tenant_id = sqlc.arg('tenant_id') AND e.id = s.id
LEFT JOIN audit_leaves l ON l.tenant_id = e.tenant_id AND l.event_id = e.id
LEFT JOIN users a ON a.id = e.actor_id
LEFT JOIN users u ON u.id = CASE WHEN e.entity = 'user' AND e.entity_id ~ '^[0-9]{1,18}$' THEN e.entity_id::bigint END
ORDER BY e.id DESC;

-- name: AuditEventNewer :many
-- Oldest first, events with id in (after_id, through_id], filtered: the
-- live timeline's poll.
SELECT sqlc.embed(e), coalesce(l.seq, 0)::bigint AS leaf_seq,
       coalesce(a.name, '')::text AS actor_name, coalesce(a.staff_role, '')::text AS actor_role,
       coalesce(u.name, '')::text AS entity_user_name
FROM audit_events e
LEFT JOIN audit_leaves l ON l.tenant_id = e.tenant_id AND l.event_id = e.id
LEFT JOIN users a ON a.id = e.actor_id
LEFT JOIN users u ON u.id = CASE WHEN e.entity = 'user' AND e.entity_id ~ '^[0-9]{1,18}$' THEN e.entity_id::bigint END
WHERE e.tenant_id = sqlc.arg('tenant_id')
  AND e.id > sqlc.arg('after_id')
  AND e.id <= sqlc.arg('through_id')
  AND (sqlc.narg('action')::text IS NULL OR e.action = sqlc.narg('action')::text)
  AND (sqlc.narg('actions')::text[] IS NULL OR e.action = ANY(sqlc.narg('actions')::text[]))
  AND (sqlc.narg('search')::text IS NULL OR audit_search_text(e.detail) LIKE sqlc.narg('search')::text)
  AND (sqlc.narg('entity')::text IS NULL OR e.entity = sqlc.narg('entity')::text)
  AND (sqlc.narg('entity_id')::text IS NULL OR e.entity_id = sqlc.narg('entity_id')::text)
  AND (sqlc.narg('actor_kind')::text IS NULL OR e.actor_kind = sqlc.narg('actor_kind')::text)
  AND (sqlc.narg('actor_id')::bigint IS NULL OR e.actor_id = sqlc.narg('actor_id')::bigint)
  AND (sqlc.narg('trace_id')::text IS NULL OR e.trace_id = sqlc.narg('trace_id')::text)
  AND (sqlc.narg('job_id')::bigint IS NULL OR e.job_id = sqlc.narg('job_id')::bigint)
  AND (sqlc.narg('from_time')::timestamptz IS NULL OR e.occurred_at >= sqlc.narg('from_time')::timestamptz)
  AND (sqlc.narg('to_time')::timestamptz IS NULL OR e.occurred_at < sqlc.narg('to_time')::timestamptz)
ORDER BY e.id
LIMIT sqlc.arg('lim');

-- name: AuditEventLastID :one
-- Highest event id of a tenant (0 when none): one probe of the primary key.
SELECT coalesce(max(id), 0)::bigint FROM audit_events WHERE tenant_id = $1;

-- name: AuditTimelineVersion :one
-- Two numbers that change whenever a tenant's newest timeline page could:
-- the tree's size grows with every sealed event, and the queue counts
-- every committed event not sealed yet (it shrinks only as the size grows,
-- in the sealer's transaction). Neither ever returns to an earlier pair.
SELECT coalesce((SELECT t.size FROM audit_trees t WHERE t.tenant_id = sqlc.arg('tenant_id')), 0)::bigint AS size,
       (SELECT count(*) FROM audit_unsealed u WHERE u.tenant_id = sqlc.arg('tenant_id'))::bigint AS unsealed;

-- name: AuditEventEntityHistory :many
-- One entity's story in one tenant, oldest first (its history page), with
-- the events of the same entity under the same name (a project deleted and
-- created again keeps one story): audit_namesakes finds their ids.
SELECT sqlc.embed(e), coalesce(l.seq, 0)::bigint AS leaf_seq,
       coalesce(a.name, '')::text AS actor_name, coalesce(a.staff_role, '')::text AS actor_role,
       coalesce(u.name, '')::text AS entity_user_name
FROM audit_events e
LEFT JOIN audit_leaves l ON l.tenant_id = e.tenant_id AND l.event_id = e.id
LEFT JOIN users a ON a.id = e.actor_id
LEFT JOIN users u ON u.id = CASE WHEN e.entity = 'user' AND e.entity_id ~ '^[0-9]{1,18}$' THEN e.entity_id::bigint END
WHERE e.tenant_id = sqlc.arg('tenant_id') AND e.entity = sqlc.arg('entity')
  AND e.entity_id = ANY(ARRAY(SELECT audit_namesakes(sqlc.arg('entity'), sqlc.arg('name')::text)
                              UNION ALL SELECT sqlc.arg('entity_id')::text))
ORDER BY e.id
LIMIT sqlc.arg('lim');

-- name: AuditEventEntityName :one
-- The name an entity last carried in its events ('' for none): the title of
-- its history page, and what finds its namesakes.
SELECT coalesce((SELECT e.detail->>'name' FROM audit_events e
  WHERE e.tenant_id = sqlc.arg('tenant_id') AND e.entity = sqlc.arg('entity') AND e.entity_id = sqlc.arg('entity_id')
    AND e.detail ? 'name'
  ORDER BY e.id DESC LIMIT 1), '')::text AS name;

-- name: AuditEventSearch :many
-- Forensics by trace id or job id (globally indexed), optionally within one
-- tenant; newest first by id, keyset on id. Cross-tenant only through the
-- system pool (row-level security limits jejak_app to its tenant anyway).
-- The caller sets at least one of trace_id and job_id.
SELECT sqlc.embed(e), coalesce(l.seq, 0)::bigint AS leaf_seq,
       coalesce(a.name, '')::text AS actor_name, coalesce(a.staff_role, '')::text AS actor_role,
       coalesce(u.name, '')::text AS entity_user_name
FROM audit_events e
LEFT JOIN audit_leaves l ON l.tenant_id = e.tenant_id AND l.event_id = e.id
LEFT JOIN users a ON a.id = e.actor_id
LEFT JOIN users u ON u.id = CASE WHEN e.entity = 'user' AND e.entity_id ~ '^[0-9]{1,18}$' THEN e.entity_id::bigint END
WHERE (sqlc.narg('trace_id')::text IS NULL OR e.trace_id = sqlc.narg('trace_id')::text)
  AND (sqlc.narg('job_id')::bigint IS NULL OR e.job_id = sqlc.narg('job_id')::bigint)
  AND (sqlc.narg('tenant_id')::bigint IS NULL OR e.tenant_id = sqlc.narg('tenant_id')::bigint)
  AND (sqlc.narg('before_id')::bigint IS NULL OR e.id < sqlc.narg('before_id')::bigint)
ORDER BY e.id DESC
LIMIT sqlc.arg('lim');

-- name: AuditTenantIDs :many
-- Every tenant, for verifying all logs; the system tenant (staff
-- notifications) only once it has events (its endpoint disabled by a
-- receiver's 410 is audited there), so a routine run does not list it.
SELECT id FROM tenants t
 WHERE NOT t.is_system OR EXISTS (SELECT 1 FROM audit_events e WHERE e.tenant_id = t.id)
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
ANALYZE audit_sealed, audit_unsealed;
