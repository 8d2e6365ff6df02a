-- The outbox trace index outlives its messages for a while (the incident
-- page reads it through TraceIncident, trace.sql), but not forever.

-- name: TraceOutboxPrune :execrows
DELETE FROM outbox_traces
 WHERE created_at < coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @older_than_seconds::float8);
