-- name: JobStampControls :exec
-- Stamps a payload version above 1 and/or a dependency on a job just
-- inserted; a dependent that must wait gets available_at = 9999-12-31 (the
-- claim never reaches it) until its prerequisite succeeds.
UPDATE jobs
   SET payload_version = sqlc.arg(payload_version),
       depends_on = sqlc.narg(depends_on),
       available_at = CASE WHEN sqlc.arg(wait)::bool THEN '9999-12-31 00:00:00+00'::timestamptz ELSE available_at END
 WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id);

-- name: JobCancelPending :exec
UPDATE jobs SET state = 'cancelled', finished_at = coalesce(sqlc.narg('now')::timestamptz, now()), last_error = sqlc.arg(reason)
 WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) AND state = 'pending';

-- name: JobLockForDependents :one
-- Locks the prerequisite so its completion waits for the dependent's
-- enqueue to commit, and marks it so the release trigger fires.
UPDATE jobs SET has_dependents = true
 WHERE id = $1 AND tenant_id = $2
RETURNING state;

-- name: JobDependents :many
SELECT id, kind, state FROM jobs WHERE tenant_id = $1 AND depends_on = $2 ORDER BY id LIMIT 50;

-- name: JobDependsOn :one
SELECT depends_on, payload_version FROM jobs WHERE tenant_id = $1 AND id = $2;

-- name: PauseList :many
SELECT * FROM job_pauses ORDER BY scope, name;

-- name: PauseInsert :one
INSERT INTO job_pauses (scope, name, reason, paused_by, auto, paused_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (scope, name) DO NOTHING
RETURNING *;

-- name: PauseDelete :one
DELETE FROM job_pauses WHERE scope = $1 AND name = $2 RETURNING *;

-- name: PauseLogInsert :exec
INSERT INTO job_pause_log (scope, name, action, reason, actor_id, auto, at, detail)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8);

-- name: PauseLogRecent :many
SELECT * FROM job_pause_log ORDER BY id DESC LIMIT $1;

-- name: KindFailureRates :many
-- Attempts per kind over a recent window, from the per-minute rollup.
SELECT kind, sum(succeeded)::bigint AS succeeded, sum(failed)::bigint AS failed
  FROM job_stats_minute
 WHERE minute >= sqlc.arg(since)
 GROUP BY kind;

-- name: JobExpiredSensitive :many
-- Running jobs of sensitive kinds, or replayed by an operator, whose lease
-- has passed, locked so the rescue that follows in the same transaction is
-- the one recorded.
SELECT id, tenant_id, kind, trace_id, attempt, max_attempts, worker_id, replayed_by FROM jobs
 WHERE state = 'running' AND lease_expires_at < coalesce(sqlc.narg('now')::timestamptz, now())
   AND (kind = ANY(@kinds::text[]) OR replayed_by IS NOT NULL)
 FOR UPDATE;

-- name: JobCancelledDependents :many
-- Dependents the release trigger (jobs_release_dependents) cancelled when
-- the given jobs ended, transitively, by kind: the trigger stamps them
-- with their prerequisite's finished_at, which tells them from dependents
-- cancelled at another time. One probe of jobs_depends_on_idx per level.
WITH RECURSIVE gone AS (
    SELECT d.id, d.tenant_id, d.kind, d.finished_at
      FROM jobs p JOIN jobs d ON d.tenant_id = p.tenant_id AND d.depends_on = p.id
     WHERE p.id = ANY(@ids::bigint[]) AND d.state = 'cancelled' AND d.finished_at = p.finished_at
    UNION ALL
    SELECT d.id, d.tenant_id, d.kind, d.finished_at
      FROM gone g JOIN jobs d ON d.tenant_id = g.tenant_id AND d.depends_on = g.id
     WHERE d.state = 'cancelled' AND d.finished_at = g.finished_at
)
SELECT kind, count(*)::int AS n FROM gone GROUP BY kind ORDER BY kind;
