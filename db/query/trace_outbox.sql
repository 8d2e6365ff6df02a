-- Incident page sections for the outbox and webhook deliveries (system
-- pool), through the trace index and the deliveries' event index.

-- name: TraceOutbox :many
SELECT m.id, m.tenant_id, m.event_type, m.aggregate_type, m.aggregate_id, m.state, m.attempts,
       m.created_at, m.processed_at, m.last_error
  FROM outbox_traces t
  JOIN outbox_messages m ON m.tenant_id = t.tenant_id AND m.id = t.message_id
 WHERE t.trace_id = @trace_id
 ORDER BY t.message_id
 LIMIT @lim;

-- name: TraceDeliveries :many
SELECT d.id, d.tenant_id, d.event_id, d.event_type, d.state, d.attempts, d.last_status, d.last_error,
       d.created_at, d.updated_at, e.url
  FROM webhook_deliveries d
  JOIN webhook_endpoints e ON e.tenant_id = d.tenant_id AND e.id = d.endpoint_id
 WHERE d.event_id = ANY(@event_ids::bigint[])
 ORDER BY d.id
 LIMIT @lim;

-- name: TraceOutboxPrune :execrows
DELETE FROM outbox_traces
 WHERE created_at < coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @older_than_seconds::float8);
