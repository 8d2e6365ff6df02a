-- Queries of the in-process alert rules (internal/alert). They run on the
-- system pool, on the maintenance leader, every evaluation interval.

-- name: AlertNow :one
SELECT coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz;

-- name: AlertStateList :many
SELECT rule, state, since, value, summary, evaluated_at FROM alert_states ORDER BY rule;

-- name: AlertStateUpsert :exec
INSERT INTO alert_states (rule, state, since, value, summary, evaluated_at)
VALUES (@rule, @state, @since, @value, @summary, @evaluated_at)
ON CONFLICT (rule) DO UPDATE
   SET state = excluded.state, since = excluded.since, value = excluded.value,
       summary = excluded.summary, evaluated_at = excluded.evaluated_at;

-- name: AlertEventInsert :one
INSERT INTO alert_events (rule, state, value, summary, at)
VALUES (@rule, @state, @value, @summary, @at)
RETURNING id;

-- name: AlertEventsRecent :many
SELECT id, rule, state, value, summary, at FROM alert_events ORDER BY at DESC, id DESC LIMIT @lim;

-- name: AlertDeadSince :one
-- Jobs that became dead letters since a time (the per-minute rollup).
SELECT coalesce(sum(dead), 0)::bigint FROM job_stats_minute WHERE minute >= @since::timestamptz;

-- name: AlertFinishedSince :one
-- Attempts finished (succeeded or failed) since a time: the queue's progress.
SELECT coalesce(sum(succeeded + failed), 0)::bigint FROM job_stats_minute WHERE minute >= @since::timestamptz;

-- name: AlertDueWaiting :one
-- Due pending jobs, counted up to a cap (an existence check with a size,
-- not a count of the whole queue).
SELECT count(*)::bigint FROM (
    SELECT 1 FROM jobs
     WHERE state = 'pending' AND available_at <= coalesce(sqlc.narg('now')::timestamptz, now())
     LIMIT @cap
) due;

-- name: AlertExpiredSince :one
-- Jobs dead-lettered because they expired before running, since a time
-- (dead letters are few: the dead partial index).
SELECT count(*)::bigint FROM jobs
 WHERE state = 'dead' AND error_class = 'policy' AND finished_at >= @since::timestamptz
   AND last_error LIKE 'job expired before it ran%';

-- name: AlertWatermarkGet :one
-- Locked until the evaluation commits: should two replicas briefly both
-- believe they lead, the second waits and then reads the moved watermark
-- instead of counting the same enqueues twice.
SELECT upto FROM alert_watermarks WHERE name = @name FOR UPDATE;

-- name: AlertWatermarkSet :exec
INSERT INTO alert_watermarks (name, upto) VALUES (@name, @upto)
ON CONFLICT (name) DO UPDATE SET upto = excluded.upto;

-- name: AlertPrincipalRollup :execrows
-- Adds enqueues recorded in the trace index in (from, upto] to the
-- per-principal minutes (principal 0 = no requesting user).
INSERT INTO alert_principal_minute (tenant_id, principal, minute, n)
SELECT tenant_id, coalesce(requested_by, 0), date_trunc('minute', created_at), count(*)
  FROM job_traces
 WHERE created_at > @from_at::timestamptz AND created_at <= @upto::timestamptz
 GROUP BY 1, 2, 3
ON CONFLICT (tenant_id, minute, principal) DO UPDATE SET n = alert_principal_minute.n + excluded.n;

-- name: AlertPrincipalWindows :many
-- Per principal: enqueues in the recent window and in the baseline before it.
SELECT tenant_id, principal,
       coalesce(sum(n) FILTER (WHERE minute >= @recent_since::timestamptz), 0)::bigint AS recent,
       coalesce(sum(n) FILTER (WHERE minute < @recent_since::timestamptz), 0)::bigint AS baseline
  FROM alert_principal_minute
 WHERE minute >= @base_since::timestamptz AND principal <> 0
 GROUP BY tenant_id, principal
HAVING coalesce(sum(n) FILTER (WHERE minute >= @recent_since::timestamptz), 0) >= @min_recent::bigint;

-- name: AlertMissingActorSince :one
SELECT coalesce(sum(n), 0)::bigint FROM alert_principal_minute WHERE principal = 0 AND minute >= @since::timestamptz;

-- name: AlertWorkerAdd :exec
INSERT INTO alert_worker_minute (worker_id, minute, attempts, failures)
VALUES (@worker_id, date_trunc('minute', @at::timestamptz), @attempts, @failures)
ON CONFLICT (minute, worker_id) DO UPDATE
   SET attempts = alert_worker_minute.attempts + excluded.attempts,
       failures = alert_worker_minute.failures + excluded.failures;

-- name: AlertWorkersSince :many
SELECT worker_id, sum(attempts)::bigint AS attempts, sum(failures)::bigint AS failures
  FROM alert_worker_minute WHERE minute >= @since::timestamptz
 GROUP BY worker_id ORDER BY worker_id;

-- name: AlertPruneRollups :exec
WITH p AS (DELETE FROM alert_principal_minute WHERE minute < @before::timestamptz)
DELETE FROM alert_worker_minute WHERE minute < @before::timestamptz;

-- name: AlertPruneEvents :execrows
DELETE FROM alert_events WHERE at < @before::timestamptz;

-- name: AlertAutoPausedKinds :many
SELECT name FROM job_pauses WHERE scope = 'kind' AND auto ORDER BY name;
