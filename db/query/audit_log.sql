-- The audit log's sealer, proofs and verification (internal/audit).

-- name: AuditSealWork :many
-- Tenants the sealer has work for: events waiting in the queue (a loose
-- index scan, one probe per tenant however long the queue), v1 events not
-- yet in the tree (the migrated chains), and trees grown since their last
-- checkpoint; each with whether its tree exists yet, so that a sealer
-- finding the tree locked knows it is held, not missing, without asking.
-- Only the tenants of the sealer's slot (tenant_in_slot; 1 and 0 for all),
-- and the others' whose first waiting event has waited steal_after
-- seconds: their own sealer is gone or behind.
WITH RECURSIVE q AS (
    (SELECT u.tenant_id FROM audit_unsealed u ORDER BY u.tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT n.tenant_id FROM audit_unsealed n WHERE n.tenant_id > q.tenant_id ORDER BY n.tenant_id LIMIT 1)
    FROM q WHERE q.tenant_id IS NOT NULL
), work AS (
    SELECT q.tenant_id::bigint AS tenant_id FROM q WHERE q.tenant_id IS NOT NULL
    UNION
    SELECT h.tenant_id FROM audit_heads h LEFT JOIN audit_trees t ON t.tenant_id = h.tenant_id
    WHERE h.seq > coalesce(t.size, 0)
    UNION
    SELECT t.tenant_id FROM audit_trees t WHERE t.size > t.signed_size
)
SELECT w.tenant_id, EXISTS (SELECT 1 FROM audit_trees t WHERE t.tenant_id = w.tenant_id)::boolean AS has_tree
FROM work w
WHERE tenant_in_slot(w.tenant_id, sqlc.arg('members')::int, sqlc.arg('rank')::int)
   OR (SELECT u.occurred_at FROM audit_unsealed u WHERE u.tenant_id = w.tenant_id ORDER BY u.event_id LIMIT 1)
      <= now() - make_interval(secs => sqlc.arg('steal_after')::float8)
ORDER BY w.tenant_id;

-- name: AuditTreeCreate :exec
-- The tree and the search index's head, which covers nothing yet.
WITH tree AS (
    INSERT INTO audit_trees (tenant_id, root) VALUES (sqlc.arg('tenant_id'), sqlc.arg('root'))
    ON CONFLICT (tenant_id) DO NOTHING
    RETURNING tenant_id
)
INSERT INTO audit_search_heads (tenant_id, size) SELECT tree.tenant_id, 0 FROM tree;

-- name: AuditTreeLock :one
-- The sealer's one lock per batch. SKIP LOCKED: another sealer holding it
-- is sealing this tenant now, so there is nothing to wait for. v1_size is
-- how long the tenant's migrated v1 chain is.
SELECT t.size, t.root, t.signed_size, t.signed_at, now()::timestamptz AS now,
       tn.slug, tn.time_zone, coalesce(h.seq, 0)::bigint AS v1_size
FROM audit_trees t
JOIN tenants tn ON tn.id = t.tenant_id
LEFT JOIN audit_heads h ON h.tenant_id = t.tenant_id
WHERE t.tenant_id = sqlc.arg('tenant_id')
FOR UPDATE OF t SKIP LOCKED;

-- name: AuditV1Batch :many
-- Migrated v1 events in seq order, from after_seq on (the columns of
-- AuditUnsealedBatch's events, in its order: one row type serves both).
-- The tree's edge is read on its own: migrating a chain is done once.
SELECT e.tenant_id, e.seq, e.id, e.actor_kind, e.actor_id, e.action, e.entity, e.entity_id,
       e.detail::text AS detail_text, e.occurred_at, e.trace_id, e.job_id, e.prev_hash,
       now()::timestamptz AS queued_at, NULL::bytea AS hashes
FROM audit_sealed e
WHERE e.tenant_id = sqlc.arg('tenant_id') AND e.seq > sqlc.arg('after_seq')
ORDER BY e.seq
LIMIT sqlc.arg('lim');

-- name: AuditUnsealedBatch :many
-- The oldest unsealed events of a tenant, in id order; then the leaves
-- whose seqs are in edge with their stored hashes (hashes is null on the
-- events' rows): the tree's right edge, all the batch is appended to, read
-- in the same round trip as the batch.
(SELECT q.tenant_id, NULL::bigint AS seq, q.event_id AS id, q.actor_kind, q.actor_id, q.action, q.entity, q.entity_id,
        q.detail::text AS detail_text, q.occurred_at, q.trace_id, q.job_id, NULL::bytea AS prev_hash, q.queued_at,
        NULL::bytea AS hashes
   FROM audit_unsealed q
  WHERE q.tenant_id = sqlc.arg('tenant_id')
  ORDER BY q.event_id
  LIMIT sqlc.arg('lim'))
UNION ALL
SELECT l.tenant_id, l.seq, l.event_id, '', NULL, '', '', '', '', 'epoch', '', NULL, NULL, 'epoch', l.hashes
  FROM audit_leaves l
 WHERE l.tenant_id = sqlc.arg('tenant_id') AND l.seq = ANY(sqlc.arg('edge')::bigint[]);

-- name: AuditLeafHashes :many
SELECT seq, hashes FROM audit_leaves
WHERE tenant_id = sqlc.arg('tenant_id') AND seq = ANY(sqlc.arg('seqs')::bigint[]);

-- name: AuditSealBatch :exec
-- A sealer's batch written in one statement, sent with the transaction's
-- COMMIT (one round trip: on a busy database every round trip of the batch
-- also waits for a core, and the tenant's next batch waits for this one):
-- the leaves; the queued events
-- moved from the queue to audit_sealed, keeping their ids (the queue's
-- delete trigger checks at the statement's end that every deleted event
-- arrived), in id order as the leaves are, so the indexes of audit_sealed
-- grow at their right-hand edge; the moved events counted by day in the
-- tenant's time zone; the tree grown; and, when note is not empty, the
-- checkpoint it signs stored and the tree marked signed at size. Every
-- array may be empty (a pass that only signs). Fails unless every queued
-- event of the batch moved (audit_sealed_all).
WITH leaves AS (
    INSERT INTO audit_leaves (tenant_id, seq, event_id, hashes)
    SELECT sqlc.arg('tenant_id'), unnest(sqlc.arg('seqs')::bigint[]), unnest(sqlc.arg('leaf_event_ids')::bigint[]),
           unnest(sqlc.arg('hashes')::bytea[])
), moved AS (
    DELETE FROM audit_unsealed d
     WHERE d.tenant_id = sqlc.arg('tenant_id') AND d.event_id = ANY(sqlc.arg('queued_ids')::bigint[])
    RETURNING d.*
), sealed AS (
    INSERT INTO audit_sealed (tenant_id, id, actor_kind, actor_id, action, entity, entity_id,
                              detail, occurred_at, trace_id, job_id)
    SELECT m.tenant_id, m.event_id, m.actor_kind, m.actor_id, m.action, m.entity, m.entity_id,
           m.detail, m.occurred_at, m.trace_id, m.job_id
      FROM moved m
     ORDER BY m.event_id
    RETURNING 1
), days AS (
    INSERT INTO audit_day_counts AS c (tenant_id, day, events)
    SELECT sqlc.arg('tenant_id'), (m.occurred_at AT TIME ZONE sqlc.arg('zone')::text)::date, count(*)
      FROM moved m
     GROUP BY 2
     ORDER BY 2
    ON CONFLICT (tenant_id, day) DO UPDATE SET events = c.events + EXCLUDED.events
), grown AS (
    UPDATE audit_trees t
       SET size = sqlc.arg('size'), root = sqlc.arg('root'),
           updated_at = CASE WHEN sqlc.arg('size') > t.size THEN now() ELSE t.updated_at END,
           signed_size = CASE WHEN sqlc.arg('note')::text <> '' THEN sqlc.arg('size') ELSE t.signed_size END,
           signed_at = CASE WHEN sqlc.arg('note')::text <> '' THEN now() ELSE t.signed_at END
     WHERE t.tenant_id = sqlc.arg('tenant_id')
), signed AS (
    INSERT INTO audit_checkpoints (tenant_id, size, root, note)
    SELECT sqlc.arg('tenant_id'), sqlc.arg('size'), sqlc.arg('root'), sqlc.arg('note')::text
     WHERE sqlc.arg('note')::text <> ''
    ON CONFLICT (tenant_id, size) DO NOTHING
)
SELECT audit_sealed_all(count(*), cardinality(sqlc.arg('queued_ids')::bigint[])) FROM sealed;

-- name: AuditTreeGet :one
SELECT size, root, signed_size FROM audit_trees WHERE tenant_id = $1;

-- name: AuditCheckpointLatest :one
SELECT size, root, note FROM audit_checkpoints
WHERE tenant_id = $1 ORDER BY size DESC LIMIT 1;

-- name: AuditCheckpointNewest :one
-- The checkpoint signed last, of any tenant: a sealer checks at start that
-- its key made it. Reads every tenant's tree row once (a start-up check).
SELECT c.tenant_id, c.size, c.note
  FROM audit_trees t
  JOIN audit_checkpoints c ON c.tenant_id = t.tenant_id AND c.size = t.signed_size
 ORDER BY t.signed_at DESC
 LIMIT 1;

-- name: AuditLogKeyClaim :one
-- The database's log key: this sealer's when none was claimed yet (ON
-- CONFLICT: two sealers starting at once agree on the first).
WITH claimed AS (
    INSERT INTO audit_log_key (verifier_key) VALUES (@verifier_key::text)
    ON CONFLICT (one) DO NOTHING
    RETURNING verifier_key
)
SELECT verifier_key FROM claimed
UNION ALL
SELECT verifier_key FROM audit_log_key WHERE NOT EXISTS (SELECT 1 FROM claimed);

-- name: AuditCheckpointsAll :many
SELECT size, root, note FROM audit_checkpoints
WHERE tenant_id = $1 ORDER BY size;

-- name: AuditLeafScan :many
-- Leaves in seq order with their events (absent when deleted), for
-- verification and export.
SELECT l.seq, l.event_id, l.hashes,
       (e.id IS NOT NULL)::boolean AS present,
       coalesce(e.seq, 0)::bigint AS v1_seq,
       coalesce(e.actor_kind, '')::text AS actor_kind, e.actor_id,
       coalesce(e.action, '')::text AS action, coalesce(e.entity, '')::text AS entity,
       coalesce(e.entity_id, '')::text AS entity_id, coalesce(e.detail::text, '')::text AS detail_text,
       coalesce(e.occurred_at, 'epoch')::timestamptz AS occurred_at, coalesce(e.trace_id, '')::text AS trace_id,
       e.job_id, e.prev_hash, e.hash
FROM audit_leaves l
LEFT JOIN audit_sealed e ON e.tenant_id = l.tenant_id AND e.id = l.event_id
WHERE l.tenant_id = sqlc.arg('tenant_id') AND l.seq > sqlc.arg('after_seq') AND l.seq <= sqlc.arg('through_seq')
ORDER BY l.seq
LIMIT sqlc.arg('lim');

-- name: AuditLastLeaf :one
-- Highest stored leaf of a tenant (0 when none).
SELECT coalesce(max(seq), 0)::bigint FROM audit_leaves WHERE tenant_id = $1;

-- name: AuditUnsealedStats :many
-- Per tenant: how many events wait for the sealer and since when.
SELECT u.tenant_id, count(*)::bigint AS events, min(u.queued_at)::timestamptz AS oldest
FROM audit_unsealed u
GROUP BY u.tenant_id
ORDER BY u.tenant_id;

-- name: AuditUnsealedOrphans :one
-- Events of a tenant in audit_sealed that are no leaf of its log: the
-- sealer moves an event there only with its leaf, so one put there by hand
-- would otherwise stay out of the log for ever.
SELECT count(*)::bigint FROM audit_sealed e
WHERE e.tenant_id = sqlc.arg('tenant_id') AND e.seq IS NULL
  AND NOT EXISTS (SELECT 1 FROM audit_leaves l WHERE l.tenant_id = e.tenant_id AND l.event_id = e.id);

-- name: AuditSearchWork :many
-- Tenants whose tree has grown past what the name search's index covers,
-- and whose first leaf after it was sealed at least min_wait seconds ago:
-- the tenants of the indexer's slot (as AuditSealWork's), and the others'
-- after steal_after seconds more.
SELECT h.tenant_id FROM audit_search_heads h
JOIN audit_trees t ON t.tenant_id = h.tenant_id
WHERE t.size > h.size
  AND EXISTS (SELECT 1 FROM audit_leaves l
               WHERE l.tenant_id = h.tenant_id AND l.seq = h.size + 1
                 AND l.sealed_at <= now() - make_interval(secs => sqlc.arg('min_wait')::float8
                     + CASE WHEN tenant_in_slot(h.tenant_id, sqlc.arg('members')::int, sqlc.arg('rank')::int)
                            THEN 0 ELSE sqlc.arg('steal_after')::float8 END))
ORDER BY h.tenant_id;

-- name: AuditUnindexedCount :one
-- Sealed events the name search's index does not cover yet, all tenants
-- (a row per tenant: the heads and trees).
SELECT coalesce(sum(t.size - h.size), 0)::bigint AS events
FROM audit_search_heads h
JOIN audit_trees t ON t.tenant_id = h.tenant_id
WHERE t.size > h.size;

-- name: AuditSearchIndex :one
-- The indexer's batch for one tenant, one statement: the leaves after the
-- index's head (locked SKIP LOCKED: another indexer holding it is
-- indexing the tenant now), their events' search text (migration 00140)
-- and the postings of its words and pairs (00143, 00144); an event
-- without a name has none (00145). The head moves to the last leaf it
-- covered. Returns how many leaves that was (0: none, or held).
WITH head AS (
    SELECT h.size FROM audit_search_heads h WHERE h.tenant_id = sqlc.arg('tenant_id') FOR UPDATE SKIP LOCKED
), leaves AS (
    SELECT l.seq, l.event_id FROM audit_leaves l, head
     WHERE l.tenant_id = sqlc.arg('tenant_id') AND l.seq > head.size
     ORDER BY l.seq
     LIMIT sqlc.arg('lim')
), added AS (
    INSERT INTO audit_search (tenant_id, event_id, text)
    SELECT n.tenant_id, n.id, n.text
      FROM (SELECT e.tenant_id, e.id, audit_search_text(e.detail) AS text
              FROM leaves l JOIN audit_sealed e ON e.tenant_id = sqlc.arg('tenant_id') AND e.id = l.event_id) n
     WHERE n.text <> '[]'
    ON CONFLICT DO NOTHING
    RETURNING tenant_id, event_id, text
), words AS (
    INSERT INTO audit_words (tenant_id, word, event_id)
    SELECT a.tenant_id, w, a.event_id FROM added a, unnest(audit_search_words(a.text)) AS w
     ORDER BY 1, 2, 3
), moved AS (
    UPDATE audit_search_heads h SET size = (SELECT max(l.seq) FROM leaves l)
     WHERE h.tenant_id = sqlc.arg('tenant_id') AND EXISTS (SELECT 1 FROM leaves)
)
SELECT count(*)::integer AS leaves FROM leaves;
