-- name: SupportTenantSearch :many
-- Staff tenant search by name or slug; tenants are few (hundreds), a
-- bounded scan is fine.
SELECT t.id, t.slug, t.name, s.plan_code, s.status,
       (SELECT count(*) FROM memberships m WHERE m.tenant_id = t.id) AS members
  FROM tenants t
  LEFT JOIN subscriptions s ON s.tenant_id = t.id
 WHERE NOT t.is_system
   AND (sqlc.arg(q)::text = '' OR t.slug ILIKE '%' || sqlc.arg(q)::text || '%' OR t.name ILIKE '%' || sqlc.arg(q)::text || '%')
 ORDER BY t.slug
 LIMIT sqlc.arg(lim);

-- name: SupportTenantMembers :many
SELECT m.user_id, u.name, u.email, m.role, m.created_at, m.disabled_at, m.disabled_reason, u.active
  FROM memberships m JOIN users u ON u.id = m.user_id
 WHERE m.tenant_id = $1
 ORDER BY CASE m.role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 ELSE 2 END, u.name;

-- name: SupportTenantJobs :many
SELECT id, kind, state, attempt, max_attempts, created_at, finished_at, last_error, trace_id
  FROM jobs WHERE tenant_id = $1
 ORDER BY id DESC LIMIT $2;
