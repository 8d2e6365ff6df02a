-- name: JobTenantList :many
-- One tenant's jobs for its owner's read-only page, newest first, keyset on
-- id (never OFFSET), optionally one state. The caller runs it in the
-- tenant's transaction, so row-level security pins the tenant as well.
--
-- Two branches so a page reads only this tenant's rows, never the primary
-- key backwards past every other tenant's: jobs not running through
-- jobs_tenant_idx (tenant_id, id), running ones through jobs_running_idx
-- (few: bounded by the workers). with_others / with_running switch a
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
        AND (sqlc.narg('before_id')::bigint IS NULL OR o.id < sqlc.narg('before_id')::bigint)
      ORDER BY o.id DESC
      LIMIT sqlc.arg('lim'))
    UNION ALL
    (SELECT r.id, r.kind, r.queue, r.state, r.attempt, r.max_attempts, r.available_at, r.created_at,
            r.finished_at, r.last_error, r.error_class, r.trace_id
       FROM jobs r
      WHERE sqlc.arg('with_running')::bool
        AND r.tenant_id = sqlc.arg('tenant_id') AND r.state = 'running'
        AND (sqlc.narg('before_id')::bigint IS NULL OR r.id < sqlc.narg('before_id')::bigint)
      ORDER BY r.id DESC
      LIMIT sqlc.arg('lim'))
) j
ORDER BY j.id DESC
LIMIT sqlc.arg('lim');
