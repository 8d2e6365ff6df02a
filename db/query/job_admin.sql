-- Staff console reads and operator actions on jobs (internal/console), and
-- the per-minute statistics rollup. The filtered reads are written as
-- "(narg IS NULL OR col = narg)" and planned with their actual parameters
-- (database.FreshPlans), so each plan uses the index that fits the filters
-- present.

-- name: JobAdminList :many
-- The job list, newest first, keyset on id. payload_contains is a jsonb
-- object matched with @> (one field=value search).
SELECT j.id, j.tenant_id, j.kind, j.queue, j.priority, j.state, j.attempt, j.max_attempts,
       j.available_at, j.created_at, j.finished_at, j.last_error, j.error_class, j.flagged,
       j.trace_id, j.worker_id
FROM jobs j
WHERE (sqlc.narg('state')::text IS NULL OR j.state = sqlc.narg('state')::text)
  AND (sqlc.narg('kind')::text IS NULL OR j.kind = sqlc.narg('kind')::text)
  AND (sqlc.narg('tenant_id')::bigint IS NULL OR j.tenant_id = sqlc.narg('tenant_id')::bigint)
  AND (sqlc.narg('queue')::text IS NULL OR j.queue = sqlc.narg('queue')::text)
  AND (sqlc.narg('id')::bigint IS NULL OR j.id = sqlc.narg('id')::bigint)
  AND (sqlc.narg('trace_id')::text IS NULL OR j.trace_id = sqlc.narg('trace_id')::text)
  AND (sqlc.narg('idempotency_key')::text IS NULL OR j.idempotency_key = sqlc.narg('idempotency_key')::text)
  AND (sqlc.narg('payload_contains')::jsonb IS NULL OR j.payload @> sqlc.narg('payload_contains')::jsonb)
  AND (sqlc.narg('before_id')::bigint IS NULL OR j.id < sqlc.narg('before_id')::bigint)
ORDER BY j.id DESC
LIMIT @lim::int;

-- name: JobAdminDeadGroups :many
-- Dead letters grouped by kind and failure class. The aggregate reads only
-- jobs_dead_all_idx (index-only); each group's example is the newest
-- error, fetched by primary key for the few groups shown.
SELECT g.kind, g.error_class, g.n, g.flagged, g.last_at,
       coalesce((SELECT j.last_error FROM jobs j WHERE j.id = g.last_id), '')::text AS example
FROM (
    SELECT kind, coalesce(error_class, '')::text AS error_class, count(*)::bigint AS n,
           count(*) FILTER (WHERE flagged)::bigint AS flagged,
           max(finished_at)::timestamptz AS last_at, max(id)::bigint AS last_id
    FROM jobs
    WHERE state = 'dead'
      AND (sqlc.narg('tenant_id')::bigint IS NULL OR tenant_id = sqlc.narg('tenant_id')::bigint)
    GROUP BY kind, coalesce(error_class, '')
    ORDER BY count(*) DESC, kind, coalesce(error_class, '')
    LIMIT 200
) g
ORDER BY g.n DESC, g.kind, g.error_class;

-- name: JobAdminDeadList :many
-- Dead letters matching a filter, newest first, keyset on id.
SELECT id, tenant_id, kind, queue, attempt, max_attempts, finished_at, last_error,
       error_class, flagged, trace_id
FROM jobs
WHERE state = 'dead'
  AND (sqlc.narg('kind')::text IS NULL OR kind = sqlc.narg('kind')::text)
  AND (sqlc.narg('error_class')::text IS NULL OR error_class = sqlc.narg('error_class')::text)
  AND (sqlc.narg('tenant_id')::bigint IS NULL OR tenant_id = sqlc.narg('tenant_id')::bigint)
  AND (sqlc.narg('flagged')::boolean IS NULL OR flagged = sqlc.narg('flagged')::boolean)
  AND (sqlc.narg('before_id')::bigint IS NULL OR id < sqlc.narg('before_id')::bigint)
ORDER BY id DESC
LIMIT @lim::int;

-- name: JobAdminDeadCount :one
-- How many dead letters match a filter, counted only up to lim (the bulk
-- action's cap plus one) so a preview never scans without bound, and the
-- newest of them: a bulk action then touches only ids up to that one, so
-- the count shown is the most it changes.
SELECT count(*)::bigint AS n, coalesce(max(id), 0)::bigint AS max_id FROM (
    SELECT id FROM jobs
    WHERE state = 'dead'
      AND (sqlc.narg('kind')::text IS NULL OR kind = sqlc.narg('kind')::text)
      AND (sqlc.narg('error_class')::text IS NULL OR error_class = sqlc.narg('error_class')::text)
      AND (sqlc.narg('tenant_id')::bigint IS NULL OR tenant_id = sqlc.narg('tenant_id')::bigint)
      AND (sqlc.narg('flagged')::boolean IS NULL OR flagged = sqlc.narg('flagged')::boolean)
    ORDER BY id DESC
    LIMIT @lim::int
) s;

-- name: JobAdminDeadLock :many
-- Lock the next batch of dead letters matching a filter (or one job by id)
-- for an operator action. FOR UPDATE re-checks state after waiting, so a
-- job retried concurrently by someone else is skipped, never done twice.
SELECT id, tenant_id, kind, trace_id, attempt, max_attempts, error_class, last_error, flagged
FROM jobs
WHERE state = 'dead'
  AND (sqlc.narg('id')::bigint IS NULL OR id = sqlc.narg('id')::bigint)
  AND (sqlc.narg('kind')::text IS NULL OR kind = sqlc.narg('kind')::text)
  AND (sqlc.narg('error_class')::text IS NULL OR error_class = sqlc.narg('error_class')::text)
  AND (sqlc.narg('tenant_id')::bigint IS NULL OR tenant_id = sqlc.narg('tenant_id')::bigint)
  AND (sqlc.narg('flagged')::boolean IS NULL OR flagged = sqlc.narg('flagged')::boolean)
  AND (sqlc.narg('before_id')::bigint IS NULL OR id < sqlc.narg('before_id')::bigint)
ORDER BY id DESC
LIMIT @lim::int
FOR UPDATE;

-- name: JobAdminRetryMany :many
-- Operator retry: dead letters go back to pending, due now, with a fresh
-- attempt budget (max_attempts per job, computed by the caller); the
-- attempt counter and the errors history are kept, the review flag is
-- cleared. Only jobs still dead change.
UPDATE jobs
   SET state = 'pending',
       available_at = coalesce(sqlc.narg('now')::timestamptz, now()),
       finished_at = NULL,
       lease_expires_at = NULL,
       flagged = false,
       max_attempts = u.max_attempts
  FROM (SELECT unnest(@ids::bigint[]) AS id, unnest(@max_attempts::int[]) AS max_attempts) u
 WHERE jobs.id = u.id AND jobs.state = 'dead'
RETURNING jobs.id;

-- name: JobAdminDiscardMany :many
-- Operator discard: dead letters become cancelled and stay for the record.
UPDATE jobs
   SET state = 'cancelled', finished_at = coalesce(sqlc.narg('now')::timestamptz, now())
 WHERE id = ANY(@ids::bigint[]) AND state = 'dead'
RETURNING id;

-- name: JobAdminNow :one
SELECT coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz;

-- name: JobAdminLiveCounts :many
-- Live counts for the overview, one branch per partial index (claim,
-- running, dead) so none of them reads succeeded or cancelled rows. For
-- pending, "extra" counts jobs already due and oldest is the oldest due
-- time (the lag); for dead, extra counts flagged ones.
SELECT tenant_id, kind, 'pending'::text AS state, count(*)::bigint AS n,
       count(*) FILTER (WHERE available_at <= sqlc.arg('now')::timestamptz)::bigint AS extra,
       min(available_at) FILTER (WHERE available_at <= sqlc.arg('now')::timestamptz) AS oldest
  FROM jobs WHERE state = 'pending' GROUP BY tenant_id, kind
UNION ALL
SELECT tenant_id, kind, 'running'::text, count(*)::bigint, 0::bigint, min(attempted_at)
  FROM jobs WHERE state = 'running' GROUP BY tenant_id, kind
UNION ALL
SELECT tenant_id, kind, 'dead'::text, count(*)::bigint, count(*) FILTER (WHERE flagged)::bigint, max(finished_at)
  FROM jobs WHERE state = 'dead' GROUP BY tenant_id, kind;

-- name: JobStatsMinutes :many
-- Totals per minute over a window, all tenants.
SELECT minute, sum(succeeded)::bigint AS succeeded, sum(failed)::bigint AS failed, sum(dead)::bigint AS dead
  FROM job_stats_minute
 WHERE minute >= @since::timestamptz
 GROUP BY minute
 ORDER BY minute;

-- name: JobStatsTotals :many
-- Totals per tenant and kind over a window.
SELECT tenant_id, kind, sum(succeeded)::bigint AS succeeded, sum(failed)::bigint AS failed, sum(dead)::bigint AS dead
  FROM job_stats_minute
 WHERE minute >= @since::timestamptz
 GROUP BY tenant_id, kind;

-- name: JobStatsPrune :execrows
DELETE FROM job_stats_minute
 WHERE minute < coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @older_than_seconds::float8);
