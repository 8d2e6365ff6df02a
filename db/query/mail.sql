-- name: MailMessageInsert :execrows
-- A redelivered message (same Message-ID) is stored once.
INSERT INTO mail_messages (tenant_id, message_id, from_addr, to_addrs, subject, body, created_at)
VALUES (@tenant_id, @message_id, @from_addr, @to_addrs::text[], @subject, @body, coalesce(sqlc.narg('now')::timestamptz, now()))
ON CONFLICT (tenant_id, message_id) DO NOTHING;

-- name: MailMessageListByTenant :many
SELECT * FROM mail_messages WHERE tenant_id = @tenant_id ORDER BY id DESC LIMIT @max_rows;

-- name: MailWeeklySummary :one
-- The figures of one tenant's weekly report, for the week ending at now.
WITH clock AS (SELECT coalesce(sqlc.narg('now')::timestamptz, now()) AS at)
SELECT t.id AS tenant_id, t.name AS tenant_name, t.slug AS tenant_slug, t.time_zone,
    clock.at::timestamptz AS week_end,
    (clock.at - interval '7 days')::timestamptz AS week_start,
    (SELECT count(*) FROM projects p WHERE p.tenant_id = t.id)::bigint AS project_count,
    (SELECT count(*) FROM projects p WHERE p.tenant_id = t.id
        AND p.created_at >= clock.at - interval '7 days' AND p.created_at < clock.at)::bigint AS projects_new,
    s.plan_code, pl.name AS plan_name, s.status AS subscription_status, s.current_period_end
FROM tenants t
CROSS JOIN clock
LEFT JOIN subscriptions s ON s.tenant_id = t.id
LEFT JOIN plans pl ON pl.code = s.plan_code
WHERE t.id = @tenant_id;

-- name: MailReportRecipients :many
-- Owners and admins of the tenant who can still sign in.
SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id
WHERE m.tenant_id = @tenant_id AND m.role IN ('owner', 'admin') AND u.active
ORDER BY u.email;
