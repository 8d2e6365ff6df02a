-- name: SessionFind :one
-- The session and, in the same round trip, the user it was signed in as
-- (user_sessions, written at sign-in): every signed-in page needs both.
SELECT s.data, s.expiry, u.id AS user_id, u.email AS user_email, u.name AS user_name,
       u.staff_role AS user_staff_role, u.locale AS user_locale, u.time_zone AS user_time_zone,
       u.active AS user_active
  FROM sessions s
  LEFT JOIN user_sessions us ON us.token = s.token
  LEFT JOIN users u ON u.id = us.user_id
 WHERE s.token = sqlc.arg('token') AND current_timestamp < s.expiry;

-- name: SessionCommit :exec
-- A request writes its session when the data changed or the idle timeout
-- has moved the expiry far enough (SessionStore.CommitCtx), so this commit
-- would add a WAL flush to many pages. It commits
-- asynchronously instead (synchronous_commit off for its own transaction
-- only): a crash can lose the last moments of session refreshes and
-- sign-ins, which costs a sign-in, never access. SessionDelete (sign-out)
-- stays synchronous, and its flush carries every earlier session write.
WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
INSERT INTO sessions (token, data, expiry)
SELECT sqlc.arg('token'), sqlc.arg('data'), sqlc.arg('expiry') FROM async
ON CONFLICT (token) DO UPDATE SET data = EXCLUDED.data, expiry = EXCLUDED.expiry;

-- name: SessionDelete :exec
DELETE FROM sessions WHERE token = sqlc.arg('token');

-- name: SessionFindWithMember :one
-- SessionFind for a tenant page: with the session and its user, the
-- tenant named by the slug and that user's membership in it (the gate
-- TenantMemberBySlug is, same conditions), so a tenant page's session,
-- viewer and membership cost one round trip. Null tenant columns: no such
-- tenant, or the system tenant; null role: no membership. It reads across
-- tenants, so it runs on the system pool.
SELECT s.data, s.expiry, u.id AS user_id, u.email AS user_email, u.name AS user_name,
       u.staff_role AS user_staff_role, u.locale AS user_locale, u.time_zone AS user_time_zone,
       u.active AS user_active,
       t.id AS tenant_id, t.slug AS tenant_slug, t.name AS tenant_name, t.time_zone AS tenant_time_zone,
       m.role AS member_role, (m.disabled_at IS NOT NULL)::boolean AS member_disabled,
       ts.members_see_billing AS members_see_billing
  FROM sessions s
  LEFT JOIN user_sessions us ON us.token = s.token
  LEFT JOIN users u ON u.id = us.user_id
  LEFT JOIN tenants t ON t.slug = sqlc.arg('slug') AND NOT t.is_system
  LEFT JOIN memberships m ON m.tenant_id = t.id AND m.user_id = u.id
  LEFT JOIN tenant_settings ts ON ts.tenant_id = t.id
 WHERE s.token = sqlc.arg('token') AND current_timestamp < s.expiry;
