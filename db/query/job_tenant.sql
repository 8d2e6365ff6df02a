-- name: JobTenantList :many
-- One tenant's jobs for its owner's read-only page, newest first, keyset on
-- id (never OFFSET), optionally one state. The caller runs it in the
-- tenant's transaction, so row-level security pins the tenant as well.
SELECT id, kind, queue, state, attempt, max_attempts, available_at, created_at,
       finished_at, last_error, error_class, trace_id
FROM jobs
WHERE tenant_id = sqlc.arg('tenant_id')
  AND (sqlc.narg('state')::text IS NULL OR state = sqlc.narg('state')::text)
  AND (sqlc.narg('before_id')::bigint IS NULL OR id < sqlc.narg('before_id')::bigint)
ORDER BY id DESC
LIMIT sqlc.arg('lim');
