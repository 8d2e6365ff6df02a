-- Approvals carry their request's trace id. The table holds staff
-- two-person actions only (a handful a day), so it has no trace index.

-- name: TraceApprovals :many
SELECT id, tenant_id, action, target_id, reason, requested_by, requested_at, state,
       decided_by, decided_at, decision_reason, job_id
  FROM approvals
 WHERE trace_id = @trace_id
 ORDER BY requested_at, id
 LIMIT @lim;
