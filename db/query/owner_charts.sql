-- name: AuditDayCountList :many
-- A tenant's events per day from from_day on (days without events absent).
SELECT day, events FROM audit_day_counts
WHERE tenant_id = sqlc.arg('tenant_id') AND day >= sqlc.arg('from_day')::date
ORDER BY day;

-- name: JobStatsDayList :many
-- A tenant's finished attempts per day from from_day on: the folded days,
-- and the minutes the last fold did not reach (job_stats_folded: every
-- minute before folded_before of a folded day is in its row, none after),
-- each minute counted once. Before any fold the mark is -infinity: every
-- minute is read. The mark is compared as it is: a COALESCE around it
-- would not be leakproof, and under row-level security the condition would
-- then be a filter over every minute of the tenant, not an index bound.
SELECT d.day, d.succeeded, d.failed, d.dead FROM job_stats_day d
WHERE d.tenant_id = sqlc.arg('tenant_id') AND d.day >= sqlc.arg('from_day')::date
UNION ALL
SELECT (m.minute AT TIME ZONE sqlc.arg('zone')::text)::date AS day,
       sum(m.succeeded)::bigint, sum(m.failed)::bigint, sum(m.dead)::bigint
FROM job_stats_minute m
WHERE m.tenant_id = sqlc.arg('tenant_id')
  AND m.minute >= (SELECT f.folded_before FROM job_stats_folded f)
  AND m.minute >= sqlc.arg('from_start')::timestamptz
GROUP BY 1
ORDER BY 1;

-- name: JobStatsFoldDays :execrows
-- Folds the minutes since the last fold into the days of job_stats_day and
-- moves the mark (job_stats_folded) in the same statement, so a chart sees
-- the days and the mark of one fold. Each fold adds only the minutes from
-- the previous mark to its own, so a pass costs what was written since the
-- last one rather than two days of every tenant's minutes (0.7 s for two
-- busy tenants' 414k rows, every maintenance pass). The first fold (the
-- mark still -infinity) replaces yesterday's and today's rows (local days,
-- all of whose minutes are still kept) with their minutes, as every fold
-- did before the mark existed. A later fold takes every minute from the
-- mark, however old (a leader away for days folds them before they are
-- pruned). The mark never moves back.
--
-- The mark is two minutes before the fold's minute: a rollup row is
-- counted under the minute its transaction began, so a completion still
-- open when the fold runs adds to a minute that has just gone by; the
-- margin keeps such late additions out of the minutes a fold takes (a
-- minute once folded is not read again). The previous mark is locked: a
-- second fold at the same moment (the leadership changing hands) waits
-- and then folds only from the first one's mark.
WITH prev AS (
    SELECT folded_before FROM job_stats_folded FOR UPDATE
), span AS (
    SELECT CASE WHEN (SELECT folded_before FROM prev) = '-infinity'
                THEN coalesce(sqlc.narg('now')::timestamptz, now()) - interval '48 hours'
                ELSE (SELECT folded_before FROM prev) END AS after,
           date_trunc('minute', coalesce(sqlc.narg('now')::timestamptz, now())) - interval '2 minutes' AS before,
           -- 0 for the first fold (replace), 1 after it (add)
           CASE WHEN (SELECT folded_before FROM prev) = '-infinity' THEN 0 ELSE 1 END AS kept
), marked AS (
    UPDATE job_stats_folded SET folded_before = greatest(folded_before, (SELECT before FROM span))
)
INSERT INTO job_stats_day AS d (tenant_id, day, succeeded, failed, dead)
SELECT m.tenant_id, (m.minute AT TIME ZONE t.time_zone)::date,
       sum(m.succeeded)::bigint, sum(m.failed)::bigint, sum(m.dead)::bigint
FROM job_stats_minute m JOIN tenants t ON t.id = m.tenant_id CROSS JOIN span
WHERE m.minute >= span.after AND m.minute < span.before
  AND (span.kept = 1
       OR (m.minute AT TIME ZONE t.time_zone)::date
          >= ((coalesce(sqlc.narg('now')::timestamptz, now()) - interval '24 hours') AT TIME ZONE t.time_zone)::date)
GROUP BY 1, 2
ORDER BY 1, 2
ON CONFLICT (tenant_id, day) DO UPDATE
    SET succeeded = d.succeeded * (SELECT kept FROM span) + EXCLUDED.succeeded,
        failed = d.failed * (SELECT kept FROM span) + EXCLUDED.failed,
        dead = d.dead * (SELECT kept FROM span) + EXCLUDED.dead;
