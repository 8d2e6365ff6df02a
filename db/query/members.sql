-- name: MemberList :many
-- A tenant's members with their names, owners first.
SELECT m.user_id, u.name, u.email, m.role, m.created_at, m.disabled_at
FROM memberships m JOIN users u ON u.id = m.user_id
WHERE m.tenant_id = $1
ORDER BY CASE m.role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 ELSE 2 END, u.name, m.user_id;

-- name: MemberDelete :one
-- A membership staff disabled is never deleted by its tenant: the row is
-- what keeps the person out until staff lift it.
DELETE FROM memberships WHERE tenant_id = $1 AND user_id = $2 AND disabled_at IS NULL RETURNING role;

-- name: MemberUserByEmail :one
SELECT id, name FROM users WHERE email = $1;

-- name: InvitationInsert :one
INSERT INTO invitations (tenant_id, email, role, invited_by, created_at)
VALUES (sqlc.arg('tenant_id'), sqlc.arg('email'), sqlc.arg('role'), sqlc.arg('invited_by'),
        coalesce(sqlc.narg('now')::timestamptz, now()))
ON CONFLICT (tenant_id, email) WHERE accepted_at IS NULL AND revoked_at IS NULL DO NOTHING
RETURNING id, created_at;

-- name: InvitationListPending :many
SELECT i.id, i.email, i.role, i.created_at, coalesce(u.name, '')::text AS invited_by_name
FROM invitations i LEFT JOIN users u ON u.id = i.invited_by
WHERE i.tenant_id = $1 AND i.accepted_at IS NULL AND i.revoked_at IS NULL
ORDER BY i.created_at DESC, i.id DESC
LIMIT 100;

-- name: InvitationRevoke :one
UPDATE invitations SET revoked_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE tenant_id = sqlc.arg('tenant_id') AND id = sqlc.arg('id') AND accepted_at IS NULL AND revoked_at IS NULL
RETURNING email;

-- name: InvitationListForEmail :many
-- Pending invitations addressed to one e-mail, across tenants (system pool).
SELECT i.tenant_id, i.id, i.role, i.created_at, t.slug, t.name AS tenant_name,
       coalesce(u.name, '')::text AS invited_by_name
FROM invitations i
JOIN tenants t ON t.id = i.tenant_id
LEFT JOIN users u ON u.id = i.invited_by
WHERE i.email = $1 AND i.accepted_at IS NULL AND i.revoked_at IS NULL
ORDER BY i.created_at DESC, i.id DESC
LIMIT 50;

-- name: InvitationAccept :one
UPDATE invitations SET accepted_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE id = sqlc.arg('id') AND email = sqlc.arg('email') AND accepted_at IS NULL AND revoked_at IS NULL
RETURNING tenant_id, role;

-- name: MemberAdd :execrows
INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, $3)
ON CONFLICT (tenant_id, user_id) DO NOTHING;
