-- name: AuditDayCountList :many
-- A tenant's events per day from from_day on (days without events absent).
SELECT day, events FROM audit_day_counts
WHERE tenant_id = sqlc.arg('tenant_id') AND day >= sqlc.arg('from_day')::date
ORDER BY day;

-- name: JobStatsDayList :many
-- A tenant's finished attempts per day from from_day on: folded days from
-- job_stats_day before recent_day, the recent days straight from the
-- per-minute rollup (recent_start is recent_day's midnight in zone).
SELECT d.day, d.succeeded, d.failed, d.dead FROM job_stats_day d
WHERE d.tenant_id = sqlc.arg('tenant_id') AND d.day >= sqlc.arg('from_day')::date AND d.day < sqlc.arg('recent_day')::date
UNION ALL
SELECT (m.minute AT TIME ZONE sqlc.arg('zone')::text)::date AS day,
       sum(m.succeeded)::bigint, sum(m.failed)::bigint, sum(m.dead)::bigint
FROM job_stats_minute m
WHERE m.tenant_id = sqlc.arg('tenant_id') AND m.minute >= sqlc.arg('recent_start')::timestamptz
GROUP BY 1
ORDER BY 1;

-- name: JobStatsFoldDays :execrows
-- Folds every tenant's minutes of yesterday and today (local days, whose
-- minutes are all still kept) into job_stats_day, replacing earlier folds.
INSERT INTO job_stats_day AS d (tenant_id, day, succeeded, failed, dead)
SELECT m.tenant_id, (m.minute AT TIME ZONE t.time_zone)::date,
       sum(m.succeeded)::bigint, sum(m.failed)::bigint, sum(m.dead)::bigint
FROM job_stats_minute m JOIN tenants t ON t.id = m.tenant_id
WHERE m.minute >= coalesce(sqlc.narg('now')::timestamptz, now()) - interval '48 hours'
  AND (m.minute AT TIME ZONE t.time_zone)::date
      >= ((coalesce(sqlc.narg('now')::timestamptz, now()) - interval '24 hours') AT TIME ZONE t.time_zone)::date
GROUP BY 1, 2
ORDER BY 1, 2
ON CONFLICT (tenant_id, day) DO UPDATE
    SET succeeded = EXCLUDED.succeeded, failed = EXCLUDED.failed, dead = EXCLUDED.dead;
