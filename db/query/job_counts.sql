-- The maintained counts behind the staff pages (job_counts,
-- job_count_deltas, job_dead_groups; see db/schema/00050_page_counts.sql).
-- The statements that move jobs write them; these fold and rebuild them.

-- name: JobCountsFold :execrows
-- Fold the appended deltas into job_counts, in one statement so a reader's
-- snapshot sees a delta either in one table or the other, never both or
-- neither. Rows appended by transactions still open are not visible to
-- the DELETE and wait for the next fold. Run by the maintenance leader.
WITH d AS (
    DELETE FROM job_count_deltas RETURNING tenant_id, kind, unfinished
)
INSERT INTO job_counts AS c (tenant_id, kind, unfinished)
SELECT tenant_id, kind, sum(unfinished)::bigint FROM d
 GROUP BY tenant_id, kind
 ORDER BY tenant_id, kind
ON CONFLICT (tenant_id, kind) DO UPDATE SET unfinished = c.unfinished + EXCLUDED.unfinished;

-- name: JobUnfinishedTotal :one
-- Every tenant's unfinished (pending or running) jobs: the folded counts
-- and the deltas not folded yet, exact in one snapshot, a few pages
-- however large the job table.
SELECT ((SELECT coalesce(sum(unfinished), 0) FROM job_counts)
      + (SELECT coalesce(sum(unfinished), 0) FROM job_count_deltas))::bigint AS unfinished;

-- name: JobCountsRebuild :exec
-- Recount from the jobs table, for a bulk load that wrote jobs directly
-- (the large-data seeder) or a repair: the old counts go and the recount
-- arrives as deltas (the DELETEs do not see rows this statement adds).
-- Run it while nothing else moves jobs.
WITH cleared AS (
    DELETE FROM job_count_deltas
), zeroed AS (
    DELETE FROM job_counts
)
INSERT INTO job_count_deltas (tenant_id, kind, unfinished)
SELECT tenant_id, kind, count(*) FROM jobs WHERE state IN ('pending', 'running')
 GROUP BY tenant_id, kind;

-- name: JobDeadGroupsClear :exec
DELETE FROM job_dead_groups;

-- name: JobDeadGroupsRebuild :exec
-- Regroup the dead letters from the jobs table after JobDeadGroupsClear,
-- in the same transaction (see JobCountsRebuild).
INSERT INTO job_dead_groups (tenant_id, kind, error_class, n, flagged, last_at, last_id)
SELECT tenant_id, kind, coalesce(error_class, ''), count(*), count(*) FILTER (WHERE flagged),
       max(finished_at), max(id)
  FROM jobs WHERE state = 'dead'
 GROUP BY tenant_id, kind, coalesce(error_class, '');

-- name: JobCountsScheduledRefresh :exec
-- Recount the jobs scheduled ahead per tenant and kind (pending, due after
-- now) through jobs_pending_at_idx, and note when. Run by the maintenance
-- leader after the fold, the only writer of job_counts, so nothing waits
-- on these rows. Only rows whose count changed are written.
WITH s AS (
    SELECT tenant_id, kind, count(*)::bigint AS n FROM jobs
     WHERE state = 'pending' AND available_at > coalesce(sqlc.narg('now')::timestamptz, now())
     GROUP BY tenant_id, kind
), zeroed AS (
    UPDATE job_counts c SET scheduled = 0
     WHERE c.scheduled <> 0
       AND NOT EXISTS (SELECT 1 FROM s WHERE s.tenant_id = c.tenant_id AND s.kind = c.kind)
), stamped AS (
    INSERT INTO job_counts_scheduled_at AS a (only_row, counted_at)
    VALUES (true, coalesce(sqlc.narg('now')::timestamptz, now()))
    ON CONFLICT (only_row) DO UPDATE SET counted_at = EXCLUDED.counted_at
)
INSERT INTO job_counts AS c (tenant_id, kind, unfinished, scheduled)
SELECT tenant_id, kind, 0, n FROM s
 ORDER BY tenant_id, kind
ON CONFLICT (tenant_id, kind) DO UPDATE SET scheduled = EXCLUDED.scheduled
 WHERE c.scheduled <> EXCLUDED.scheduled;

-- name: JobCountsScheduledAt :many
-- When the jobs scheduled ahead were last counted (no row: never).
SELECT counted_at FROM job_counts_scheduled_at;
