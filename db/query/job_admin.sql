-- Staff console reads and operator actions on jobs (internal/console), and
-- the per-minute statistics rollup. The filtered reads are written as
-- "(narg IS NULL OR col = narg)" and planned with their actual parameters
-- (database.FreshPlans), so each plan uses the index that fits the filters
-- present.

-- name: JobAdminList :many
-- The job list, newest first, keyset on id. payload_contains is a jsonb
-- object matched with @> (one field=value search).
--
-- Two branches, like the tenant list (JobTenantList): jobs not running,
-- where a tenant filter reads only that tenant's rows through
-- the primary key (tenant_id, id), newest first without one through
-- jobs_id_idx, and running jobs through jobs_running_idx (few).
-- with_others / with_running switch a branch off when the state filter
-- excludes it. floor_id, when set, bounds the scan to ids in
-- [floor_id, before_id) for filters no index serves (see console.Jobs).
SELECT j.id, j.tenant_id, j.kind, j.queue, j.priority, j.state, j.attempt, j.max_attempts,
       j.available_at, j.created_at, j.finished_at, j.last_error, j.error_class, j.flagged,
       j.trace_id, j.worker_id
FROM (
    (SELECT o.id, o.tenant_id, o.kind, o.queue, o.priority, o.state, o.attempt, o.max_attempts,
            o.available_at, o.created_at, o.finished_at, o.last_error, o.error_class, o.flagged,
            o.trace_id, o.worker_id
       FROM jobs o
      WHERE sqlc.arg('with_others')::bool AND o.state <> 'running'
        AND (sqlc.narg('state')::text IS NULL OR o.state = sqlc.narg('state')::text)
        AND (sqlc.narg('kind')::text IS NULL OR o.kind = sqlc.narg('kind')::text)
        AND (sqlc.narg('tenant_id')::bigint IS NULL OR o.tenant_id = sqlc.narg('tenant_id')::bigint)
        AND (sqlc.narg('queue')::text IS NULL OR o.queue = sqlc.narg('queue')::text)
        AND (sqlc.narg('id')::bigint IS NULL OR o.id = sqlc.narg('id')::bigint)
        AND (sqlc.narg('trace_id')::text IS NULL OR o.trace_id = sqlc.narg('trace_id')::text)
        AND (sqlc.narg('idempotency_key')::text IS NULL OR o.idempotency_key = sqlc.narg('idempotency_key')::text)
        AND (sqlc.narg('payload_contains')::jsonb IS NULL OR o.payload @> sqlc.narg('payload_contains')::jsonb)
        AND (sqlc.narg('before_id')::bigint IS NULL OR o.id < sqlc.narg('before_id')::bigint)
        AND (sqlc.narg('floor_id')::bigint IS NULL OR o.id >= sqlc.narg('floor_id')::bigint)
      ORDER BY o.id DESC
      LIMIT @lim::int)
    UNION ALL
    (SELECT r.id, r.tenant_id, r.kind, r.queue, r.priority, r.state, r.attempt, r.max_attempts,
            r.available_at, r.created_at, r.finished_at, r.last_error, r.error_class, r.flagged,
            r.trace_id, r.worker_id
       FROM jobs r
      WHERE sqlc.arg('with_running')::bool AND r.state = 'running'
        AND (sqlc.narg('state')::text IS NULL OR r.state = sqlc.narg('state')::text)
        AND (sqlc.narg('kind')::text IS NULL OR r.kind = sqlc.narg('kind')::text)
        AND (sqlc.narg('tenant_id')::bigint IS NULL OR r.tenant_id = sqlc.narg('tenant_id')::bigint)
        AND (sqlc.narg('queue')::text IS NULL OR r.queue = sqlc.narg('queue')::text)
        AND (sqlc.narg('id')::bigint IS NULL OR r.id = sqlc.narg('id')::bigint)
        AND (sqlc.narg('trace_id')::text IS NULL OR r.trace_id = sqlc.narg('trace_id')::text)
        AND (sqlc.narg('idempotency_key')::text IS NULL OR r.idempotency_key = sqlc.narg('idempotency_key')::text)
        AND (sqlc.narg('payload_contains')::jsonb IS NULL OR r.payload @> sqlc.narg('payload_contains')::jsonb)
        AND (sqlc.narg('before_id')::bigint IS NULL OR r.id < sqlc.narg('before_id')::bigint)
        AND (sqlc.narg('floor_id')::bigint IS NULL OR r.id >= sqlc.narg('floor_id')::bigint)
      ORDER BY r.id DESC
      LIMIT @lim::int)
) j
ORDER BY j.id DESC
LIMIT @lim::int;

-- name: JobAdminListAll :many
-- JobAdminList without filters, the list staff open most: a statement of
-- its own, prepared once per connection and run on one cached plan, where
-- the filtered one is planned for every call. before_id is always set
-- (the largest id for the first page).
SELECT j.id, j.tenant_id, j.kind, j.queue, j.priority, j.state, j.attempt, j.max_attempts,
       j.available_at, j.created_at, j.finished_at, j.last_error, j.error_class, j.flagged,
       j.trace_id, j.worker_id
FROM (
    (SELECT o.id, o.tenant_id, o.kind, o.queue, o.priority, o.state, o.attempt, o.max_attempts,
            o.available_at, o.created_at, o.finished_at, o.last_error, o.error_class, o.flagged,
            o.trace_id, o.worker_id
       FROM jobs o
      WHERE o.state <> 'running' AND o.id < @before_id::bigint
      ORDER BY o.id DESC
      LIMIT @lim::int)
    UNION ALL
    (SELECT r.id, r.tenant_id, r.kind, r.queue, r.priority, r.state, r.attempt, r.max_attempts,
            r.available_at, r.created_at, r.finished_at, r.last_error, r.error_class, r.flagged,
            r.trace_id, r.worker_id
       FROM jobs r
      WHERE r.state = 'running' AND r.id < @before_id::bigint
      ORDER BY r.id DESC
      LIMIT @lim::int)
) j
ORDER BY j.id DESC
LIMIT @lim::int;

-- name: JobAdminMaxID :one
-- The newest job id (0 when none): one probe at the end of jobs_id_idx
-- (jobs not running) and the running jobs (few, jobs_running_idx).
SELECT greatest((SELECT max(id) FROM jobs WHERE state <> 'running'),
                (SELECT max(id) FROM jobs WHERE state = 'running'), 0)::bigint;

-- name: JobAdminDeadGroups :many
-- Dead letters grouped by kind and failure class, from the maintained
-- groups (job_dead_groups: a few rows per tenant and kind), so the page
-- costs the same however many dead letters there are and whether or not
-- vacuum has caught up with the jobs table. Each group's example is the
-- error of its newest dead letter, fetched by primary key for the groups
-- shown.
SELECT g.kind, g.error_class, g.n, g.flagged, g.last_at,
       coalesce((SELECT j.last_error FROM jobs j WHERE j.tenant_id = g.last_tenant AND j.id = g.last_id), '')::text AS example
FROM (
    SELECT kind, error_class, sum(n)::bigint AS n, sum(flagged)::bigint AS flagged,
           coalesce(max(last_at), 'epoch')::timestamptz AS last_at, max(last_id)::bigint AS last_id,
           (array_agg(tenant_id ORDER BY last_id DESC NULLS LAST))[1]::bigint AS last_tenant
    FROM job_dead_groups
    WHERE (sqlc.narg('tenant_id')::bigint IS NULL OR tenant_id = sqlc.narg('tenant_id')::bigint)
    GROUP BY kind, error_class
    HAVING sum(n) > 0
    ORDER BY sum(n) DESC, kind, error_class
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
-- cleared, and the operator is stamped on the job. Only jobs still dead
-- change.
--
-- The same statement moves the jobs out of their dead-letter groups and
-- back into the unfinished count. The caller has locked the rows (FOR
-- UPDATE), so "was" reads the values the update replaces.
WITH retried AS (
UPDATE jobs
   SET state = 'pending',
       available_at = coalesce(sqlc.narg('now')::timestamptz, now()),
       finished_at = NULL,
       lease_expires_at = NULL,
       flagged = false,
       max_attempts = u.max_attempts,
       -- The engine records how this replay ends (see 00135_job_replayed_by).
       replayed_by = @operator_id::bigint
  FROM (SELECT unnest(@tenant_ids::bigint[]) AS tenant_id, unnest(@ids::bigint[]) AS id,
               unnest(@max_attempts::int[]) AS max_attempts) u,
       (SELECT w.tenant_id, w.id, w.flagged FROM jobs w
         WHERE (w.tenant_id, w.id) IN (SELECT unnest(@tenant_ids::bigint[]), unnest(@ids::bigint[]))) was
 WHERE jobs.tenant_id = u.tenant_id AND jobs.id = u.id AND was.tenant_id = u.tenant_id AND was.id = u.id
   AND jobs.state = 'dead'
RETURNING jobs.id, jobs.tenant_id, jobs.kind, jobs.error_class, was.flagged
), ungrouped AS (
    -- An upsert in key order rather than an UPDATE ... FROM: rows are
    -- locked in the order inserted, the same order every writer of
    -- job_dead_groups uses, so two writers cannot deadlock.
    INSERT INTO job_dead_groups AS g (tenant_id, kind, error_class, n, flagged)
    SELECT tenant_id, kind, coalesce(error_class, ''), -count(*), -count(*) FILTER (WHERE flagged)
      FROM retried
     GROUP BY 1, 2, 3
     ORDER BY 1, 2, 3
    ON CONFLICT (tenant_id, kind, error_class) DO UPDATE
       SET n = g.n + EXCLUDED.n, flagged = g.flagged + EXCLUDED.flagged
), counted AS (
    INSERT INTO job_count_deltas (tenant_id, kind, unfinished)
    SELECT tenant_id, kind, count(*) FROM retried GROUP BY tenant_id, kind
)
SELECT id FROM retried;

-- name: JobAdminDiscardMany :many
-- Operator discard: dead letters become cancelled and stay for the record,
-- and leave their dead-letter groups in the same statement.
WITH discarded AS (
UPDATE jobs
   SET state = 'cancelled', finished_at = coalesce(sqlc.narg('now')::timestamptz, now())
  FROM (SELECT unnest(@tenant_ids::bigint[]) AS tenant_id, unnest(@ids::bigint[]) AS id) d
 WHERE jobs.tenant_id = d.tenant_id AND jobs.id = d.id AND jobs.state = 'dead'
RETURNING jobs.id, jobs.tenant_id, jobs.kind, jobs.error_class, jobs.flagged
), ungrouped AS (
    -- An upsert in key order rather than an UPDATE ... FROM: rows are
    -- locked in the order inserted, the same order every writer of
    -- job_dead_groups uses, so two writers cannot deadlock.
    INSERT INTO job_dead_groups AS g (tenant_id, kind, error_class, n, flagged)
    SELECT tenant_id, kind, coalesce(error_class, ''), -count(*), -count(*) FILTER (WHERE flagged)
      FROM discarded
     GROUP BY 1, 2, 3
     ORDER BY 1, 2, 3
    ON CONFLICT (tenant_id, kind, error_class) DO UPDATE
       SET n = g.n + EXCLUDED.n, flagged = g.flagged + EXCLUDED.flagged
)
SELECT id FROM discarded;

-- name: JobAdminNow :one
SELECT coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz;

-- name: JobAdminLiveCounts :many
-- Live counts for the overview per tenant and kind, none of them a scan of
-- the backlog: unfinished (pending + running) from the maintained counts
-- plus the deltas not folded yet; running from jobs_running_idx (bounded
-- by the workers' capacity); dead and flagged from the dead-letter groups;
-- "scheduled" (pending jobs due later) as the maintenance leader last
-- counted it (job_counts.scheduled, JobCountsScheduledRefresh): a job
-- leaves it when the clock passes its due time, which no statement can
-- count as it happens. Pending is unfinished minus running, due is
-- pending minus scheduled.
SELECT tenant_id, kind, sum(unfinished)::bigint AS unfinished, sum(running)::bigint AS running,
       sum(scheduled)::bigint AS scheduled, sum(dead)::bigint AS dead, sum(flagged)::bigint AS flagged
FROM (
    SELECT c.tenant_id, c.kind, c.unfinished, 0::bigint AS running, c.scheduled,
           0::bigint AS dead, 0::bigint AS flagged
      FROM job_counts c
    UNION ALL
    SELECT d.tenant_id, d.kind, d.unfinished, 0, 0, 0, 0 FROM job_count_deltas d
    UNION ALL
    SELECT r.tenant_id, r.kind, 0, 1, 0, 0, 0 FROM jobs r WHERE r.state = 'running'
    UNION ALL
    SELECT g.tenant_id, g.kind, 0, 0, 0, g.n, g.flagged FROM job_dead_groups g
) x
GROUP BY tenant_id, kind
HAVING sum(unfinished) <> 0 OR sum(dead) <> 0 OR sum(running) <> 0;

-- name: JobAdminOldestDue :many
-- The due time of the oldest pending job already due (no row when none):
-- one probe at the low end of jobs_pending_at_idx.
SELECT available_at FROM jobs
 WHERE state = 'pending' AND available_at <= sqlc.arg('now')::timestamptz
 ORDER BY available_at
 LIMIT 1;

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
