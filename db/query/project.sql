-- name: ProjectListByTenant :many
-- Newest first, keyset on id: the home page shows one page, however many
-- projects the tenant has.
SELECT * FROM projects
 WHERE tenant_id = sqlc.arg('tenant_id') AND (sqlc.narg('before_id')::bigint IS NULL OR id < sqlc.narg('before_id')::bigint)
 ORDER BY id DESC
 LIMIT sqlc.arg('lim');

-- name: ProjectInsert :one
INSERT INTO projects (tenant_id, name, created_by, created_at)
VALUES ($1, $2, $3, coalesce(sqlc.narg('now')::timestamptz, now()))
RETURNING *;

-- name: ProjectDelete :one
DELETE FROM projects WHERE tenant_id = $1 AND id = $2 RETURNING *;

