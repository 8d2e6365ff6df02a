-- Queries of the incident page: everything one trace id touched, across
-- tenants (system pool). Each reads an index keyed by trace_id.

-- name: TraceJobs :many
-- Jobs of a trace through the insert-only trace index, oldest first.
SELECT j.id, j.tenant_id, j.kind, j.queue, j.state, j.attempt, j.max_attempts,
       j.created_at, j.attempted_at, j.finished_at, j.worker_id, j.last_error,
       j.error_class, j.errors, j.requested_by, j.flagged
  FROM job_traces t
  JOIN jobs j ON j.tenant_id = t.tenant_id AND j.id = t.job_id
 WHERE t.trace_id = @trace_id
 ORDER BY t.job_id
 LIMIT @lim;

-- name: TracePrunedJobs :many
-- Jobs of a trace that retention has already deleted.
SELECT t.job_id, t.tenant_id, t.created_at
  FROM job_traces t
 WHERE t.trace_id = @trace_id
   AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.tenant_id = t.tenant_id AND j.id = t.job_id)
 ORDER BY t.job_id
 LIMIT @lim;

-- name: TraceAudit :many
-- Audit events of a trace in every tenant, in time order.
SELECT tenant_id, seq, actor_kind, actor_id, action, entity, entity_id, detail, occurred_at, job_id
  FROM audit_events
 WHERE trace_id = @trace_id
 ORDER BY occurred_at, id
 LIMIT @lim;

-- name: TraceUsers :many
SELECT id, name, email FROM users WHERE id = ANY(@ids::bigint[]);

-- name: TraceTenants :many
SELECT id, slug, name FROM tenants WHERE id = ANY(@ids::bigint[]);

-- name: TraceJobTracesPrune :execrows
-- The trace index outlives job retention (so a pruned job still shows),
-- but not forever.
DELETE FROM job_traces
 WHERE created_at < coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @older_than_seconds::float8);
