-- Read-only audit tokens (internal/audit, token.go).

-- name: AuditTokenInsert :one
INSERT INTO audit_tokens (tenant_id, name, token_hash, created_by, created_at)
VALUES (@tenant_id, @name, @token_hash, @created_by, coalesce(sqlc.narg('now')::timestamptz, now()))
RETURNING *;

-- name: AuditTokenCountActive :one
SELECT count(*) FROM audit_tokens WHERE tenant_id = @tenant_id AND revoked_at IS NULL;

-- name: AuditTokenList :many
SELECT * FROM audit_tokens WHERE tenant_id = @tenant_id ORDER BY id DESC LIMIT 200;

-- name: AuditTokenRevoke :one
UPDATE audit_tokens
   SET revoked_at = coalesce(sqlc.narg('now')::timestamptz, now()), revoked_by = @revoked_by
 WHERE tenant_id = @tenant_id AND id = @id AND revoked_at IS NULL
RETURNING *;

-- name: AuditTokenGet :one
SELECT * FROM audit_tokens WHERE tenant_id = @tenant_id AND id = @id;

-- name: AuditTokenByHash :one
SELECT * FROM audit_tokens WHERE tenant_id = @tenant_id AND token_hash = @token_hash;

-- name: AuditTokenTouch :one
-- A use moves last_used_at at most once every @every_seconds; the row it
-- returns is a use to record.
UPDATE audit_tokens
   SET last_used_at = coalesce(sqlc.narg('now')::timestamptz, now())
 WHERE tenant_id = @tenant_id AND id = @id AND revoked_at IS NULL
   AND (last_used_at IS NULL
        OR last_used_at <= coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @every_seconds::float8))
RETURNING *;

-- name: AuditTokenLockTenant :exec
-- Serialises token creation within a tenant, so the active-token limit
-- holds against concurrent creations.
SELECT pg_advisory_xact_lock(hashtextextended('audit_tokens', @tenant_id::bigint));
