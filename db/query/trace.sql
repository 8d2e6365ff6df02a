-- Queries of the incident page: everything one trace id touched, across
-- tenants (system pool).

-- name: TraceIncident :one
-- Every section of the incident page in one statement: one round trip and
-- one snapshot, each section a JSON array. Each section starts from an
-- index keyed by trace id and reaches its other rows by key:
--  * jobs: the insert-only trace index, oldest job first; each job is then
--    probed by primary key (a LATERAL with LIMIT 1 is never turned into a
--    join the planner could run as a hash join over all jobs, whatever the
--    trace index's statistics say); a job retention deleted comes back
--    with its state NULL (pruned);
--  * audit events through audit_events_trace_idx (trace_id <> '' is
--    written out so a cached generic plan can use that partial index);
--  * outbox messages through their trace index, their webhook deliveries
--    through the deliveries' event index, per message;
--  * approvals: the table holds staff two-person actions only (a handful a
--    day), so it has no trace index;
--  * the tenants and the people the other sections name, by primary key.
-- Every LIMIT is incident.Limit written as a literal: with a LIMIT
-- parameter the server re-plans the statement on every call (about 1 ms)
-- instead of keeping one generic plan.
WITH traced AS (
    SELECT t.job_id, t.tenant_id, t.created_at AS traced_at,
           j.kind, j.queue, j.state, j.attempt, j.max_attempts, j.created_at, j.finished_at,
           j.worker_id, j.last_error, j.error_class, j.errors, j.requested_by, j.flagged
      FROM (SELECT jt.job_id, jt.tenant_id, jt.created_at FROM job_traces jt
             WHERE jt.trace_id = @trace_id
             ORDER BY jt.job_id
             LIMIT 500) t
      LEFT JOIN LATERAL (
          SELECT j.kind, j.queue, j.state, j.attempt, j.max_attempts, j.created_at, j.finished_at,
                 j.worker_id, j.last_error, j.error_class, j.errors, j.requested_by, j.flagged
            FROM jobs j
           WHERE j.tenant_id = t.tenant_id AND j.id = t.job_id
           LIMIT 1) j ON true
), events AS (
    SELECT e.tenant_id, e.seq, e.id, e.actor_kind, e.actor_id, e.action, e.entity, e.entity_id,
           e.detail, e.occurred_at, e.job_id
      FROM audit_events e
     WHERE e.trace_id = @trace_id AND e.trace_id <> ''
     ORDER BY e.occurred_at, e.id
     LIMIT 500
), messages AS (
    SELECT m.id, m.tenant_id, m.event_type, m.aggregate_type, m.aggregate_id, m.state, m.attempts,
           m.created_at, m.processed_at, m.last_error
      FROM (SELECT ot.message_id, ot.tenant_id FROM outbox_traces ot
             WHERE ot.trace_id = @trace_id
             ORDER BY ot.message_id
             LIMIT 500) t
      CROSS JOIN LATERAL (
          SELECT m.id, m.tenant_id, m.event_type, m.aggregate_type, m.aggregate_id, m.state, m.attempts,
                 m.created_at, m.processed_at, m.last_error
            FROM outbox_messages m
           WHERE m.tenant_id = t.tenant_id AND m.id = t.message_id
           LIMIT 1) m
), deliveries AS (
    SELECT d.id, d.tenant_id, d.event_id, d.event_type, d.state, d.attempts, d.last_status,
           d.last_error, d.created_at, d.url
      FROM messages m
      CROSS JOIN LATERAL (
          SELECT d.id, d.tenant_id, d.event_id, d.event_type, d.state, d.attempts, d.last_status,
                 d.last_error, d.created_at, e.url
            FROM webhook_deliveries d
            JOIN webhook_endpoints e ON e.tenant_id = d.tenant_id AND e.id = d.endpoint_id
           WHERE d.event_id = m.id
           ORDER BY d.id
           LIMIT 500) d
     ORDER BY d.id
     LIMIT 500
), approvals AS (
    SELECT a.id, a.tenant_id, a.action, a.target_id, a.reason, a.requested_by, a.requested_at,
           a.state, a.decided_by, a.decided_at, a.decision_reason, a.job_id
      FROM approvals a
     WHERE a.trace_id = @trace_id
     ORDER BY a.requested_at, a.id
     LIMIT 500
)
SELECT (SELECT coalesce(json_agg(x ORDER BY x.job_id), '[]') FROM traced x)::json AS jobs,
       (SELECT coalesce(json_agg(x ORDER BY x.occurred_at, x.id), '[]') FROM events x)::json AS events,
       (SELECT coalesce(json_agg(x ORDER BY x.id), '[]') FROM messages x)::json AS messages,
       (SELECT coalesce(json_agg(x ORDER BY x.id), '[]') FROM deliveries x)::json AS deliveries,
       (SELECT coalesce(json_agg(x ORDER BY x.requested_at, x.id), '[]') FROM approvals x)::json AS approvals,
       (SELECT coalesce(json_agg(x ORDER BY x.id), '[]') FROM (
            SELECT tn.id, tn.slug, tn.name FROM tenants tn
             WHERE tn.id = ANY (ARRAY(
                   SELECT tenant_id FROM traced UNION SELECT tenant_id FROM events
                   UNION SELECT tenant_id FROM messages UNION SELECT tenant_id FROM deliveries
                   UNION SELECT tenant_id FROM approvals))) x)::json AS tenants,
       (SELECT coalesce(json_agg(x ORDER BY x.id), '[]') FROM (
            SELECT u.id, u.name, u.email FROM users u
             WHERE u.id = ANY (ARRAY(
                   SELECT requested_by FROM traced WHERE requested_by IS NOT NULL
                   UNION SELECT actor_id FROM events WHERE actor_id IS NOT NULL
                   UNION SELECT requested_by FROM approvals
                   UNION SELECT decided_by FROM approvals WHERE decided_by IS NOT NULL))) x)::json AS users;

-- name: TraceJobTracesPrune :execrows
-- The trace index outlives job retention (so a pruned job still shows),
-- but not forever.
DELETE FROM job_traces
 WHERE created_at < coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @older_than_seconds::float8);
