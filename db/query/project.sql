-- name: ProjectListByTenant :many
SELECT * FROM projects WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC;

-- name: ProjectInsert :one
INSERT INTO projects (tenant_id, name, created_by, created_at)
VALUES ($1, $2, $3, coalesce(sqlc.narg('now')::timestamptz, now()))
RETURNING *;

-- name: ProjectDelete :one
DELETE FROM projects WHERE tenant_id = $1 AND id = $2 RETURNING *;

