-- name: JobTenantList :many
-- One tenant's jobs for its owner's read-only page, newest first, keyset on
-- id (never OFFSET), optionally one state. The caller runs it in the
-- tenant's transaction, so row-level security pins the tenant as well.
--
-- Two branches so a page reads only this tenant's rows, never the primary
-- key backwards past every other tenant's: jobs not running through
-- jobs_tenant_idx (tenant_id, id), running ones through jobs_running_idx
-- (few: bounded by the workers). A kind filter has no index of its own:
-- the caller then bounds the page to ids from floor_id up (a window of the
-- tenant's index range). with_others / with_running switch a
-- branch off for the running tab and the other tabs (a false parameter
-- stops the branch before it reads anything).
SELECT j.id, j.kind, j.queue, j.state, j.attempt, j.max_attempts, j.available_at, j.created_at,
       j.finished_at, j.last_error, j.error_class, j.trace_id
FROM (
    (SELECT o.id, o.kind, o.queue, o.state, o.attempt, o.max_attempts, o.available_at, o.created_at,
            o.finished_at, o.last_error, o.error_class, o.trace_id
       FROM jobs o
      WHERE sqlc.arg('with_others')::bool
        AND o.tenant_id = sqlc.arg('tenant_id') AND o.state <> 'running'
        AND (sqlc.narg('state')::text IS NULL OR o.state = sqlc.narg('state')::text)
        AND (sqlc.narg('kind')::text IS NULL OR o.kind = sqlc.narg('kind')::text)
        AND (sqlc.narg('before_id')::bigint IS NULL OR o.id < sqlc.narg('before_id')::bigint)
        AND (sqlc.narg('floor_id')::bigint IS NULL OR o.id >= sqlc.narg('floor_id')::bigint)
      ORDER BY o.id DESC
      LIMIT sqlc.arg('lim'))
    UNION ALL
    (SELECT r.id, r.kind, r.queue, r.state, r.attempt, r.max_attempts, r.available_at, r.created_at,
            r.finished_at, r.last_error, r.error_class, r.trace_id
       FROM jobs r
      WHERE sqlc.arg('with_running')::bool
        AND r.tenant_id = sqlc.arg('tenant_id') AND r.state = 'running'
        AND (sqlc.narg('kind')::text IS NULL OR r.kind = sqlc.narg('kind')::text)
        AND (sqlc.narg('before_id')::bigint IS NULL OR r.id < sqlc.narg('before_id')::bigint)
        AND (sqlc.narg('floor_id')::bigint IS NULL OR r.id >= sqlc.narg('floor_id')::bigint)
      ORDER BY r.id DESC
      LIMIT sqlc.arg('lim'))
) j
ORDER BY j.id DESC
LIMIT sqlc.arg('lim');

-- name: JobTenantMaxID :one
-- The tenant's newest job id (0 = none), where a kind-filtered page's
-- window starts; read through jobs_tenant_idx (running jobs are newer
-- than most and few, so leaving them out only shifts the window).
SELECT coalesce(max(id), 0)::bigint FROM jobs WHERE tenant_id = @tenant_id AND state <> 'running';

-- name: JobTenantCountCapped :one
-- How many of the tenant's jobs are in a state (of a kind, when given),
-- reading at most `window` of its rows in that state: each state has an
-- index leading with tenant_id, so a tab's count costs at most a window
-- of index entries, never the tenant's whole history. seen = window means
-- the count stopped there: the page shows it as "at least".
SELECT count(*) FILTER (WHERE sqlc.narg('kind')::text IS NULL OR w.kind = sqlc.narg('kind')::text)::bigint AS n,
       count(*)::bigint AS seen
  FROM (SELECT j.kind FROM jobs j
         WHERE j.tenant_id = @tenant_id AND j.state = @state::text
         LIMIT @win::int) w;
