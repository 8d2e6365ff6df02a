-- name: TenantGetBySlug :one
-- The system tenant (staff notifications) has no pages: its slug is
-- unknown to owners and staff alike.
SELECT * FROM tenants WHERE slug = $1 AND NOT is_system;

-- name: TenantListNames :many
-- Every tenant's id, slug and name (a small table), for staff labels and
-- filters and the command line; is_system marks the reserved tenant of
-- staff notifications, which labels name but lists leave out.
SELECT id, slug, name, is_system FROM tenants ORDER BY slug;

-- name: MembershipGet :one
SELECT * FROM memberships WHERE tenant_id = $1 AND user_id = $2;

-- name: MembershipUpsert :one
INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, $3)
ON CONFLICT (tenant_id, user_id) DO UPDATE SET role = EXCLUDED.role
RETURNING *;

-- name: MembershipListByUser :many
SELECT t.id AS tenant_id, t.slug, t.name, m.role
FROM memberships m JOIN tenants t ON t.id = m.tenant_id
WHERE m.user_id = $1 AND m.disabled_at IS NULL
ORDER BY t.slug;

-- name: MembershipLockOwners :many
-- Locks every owner membership of a tenant for the rest of the transaction,
-- in user order so two lockers never deadlock. A concurrent demotion or
-- removal of an owner waits here, and once it commits this transaction
-- reads the rows again: the owner count it checks is the committed one.
SELECT user_id, (disabled_at IS NOT NULL)::boolean AS disabled
FROM memberships WHERE tenant_id = $1 AND role = 'owner'
ORDER BY user_id
FOR UPDATE;

-- name: TenantMemberBySlug :one
-- A tenant page's gate in one round trip: the tenant named by the slug and
-- the user's membership in it, with the settings that decide what the
-- member may see (no row: no page). It reads across tenants (the slug is
-- not yet a tenant id to scope by), so it runs on the system pool; it
-- names the user and the slug, and is itself the membership check.
SELECT sqlc.embed(t), m.role, m.disabled_at,
       coalesce(s.members_see_billing, false)::boolean AS members_see_billing
FROM tenants t
JOIN memberships m ON m.tenant_id = t.id AND m.user_id = @user_id
LEFT JOIN tenant_settings s ON s.tenant_id = t.id
WHERE t.slug = @slug AND NOT t.is_system;

-- name: MembershipGetWithSettings :one
-- A member's row with the tenant settings that decide what they may see.
SELECT m.tenant_id, m.user_id, m.role, m.disabled_at,
       coalesce(s.members_see_billing, false)::boolean AS members_see_billing
FROM memberships m LEFT JOIN tenant_settings s ON s.tenant_id = m.tenant_id
WHERE m.tenant_id = $1 AND m.user_id = $2;

-- name: TenantSettingsSetMembersSeeBilling :exec
INSERT INTO tenant_settings (tenant_id, members_see_billing, updated_by, updated_at)
VALUES (sqlc.arg('tenant_id'), sqlc.arg('members_see_billing'), sqlc.arg('updated_by'),
        coalesce(sqlc.narg('now')::timestamptz, now()))
ON CONFLICT (tenant_id) DO UPDATE SET members_see_billing = EXCLUDED.members_see_billing,
    updated_by = EXCLUDED.updated_by, updated_at = EXCLUDED.updated_at;
