-- name: ScheduleRunClaim :one
INSERT INTO schedule_runs (name, period_key, period_start, ran_at, worker_id)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (name, period_key) DO NOTHING
RETURNING name;

-- name: ScheduleRunFinish :exec
UPDATE schedule_runs SET jobs = $3, summary = $4 WHERE name = $1 AND period_key = $2;

-- name: ScheduleRunLatest :many
SELECT DISTINCT ON (name) name, period_key, period_start, ran_at, worker_id, jobs, summary
  FROM schedule_runs
 WHERE name = ANY(@names::text[])
 ORDER BY name, period_start DESC;

-- name: ScheduleTenantIDs :many
-- Customer tenants: the system tenant gets no per-tenant schedules.
SELECT id FROM tenants WHERE NOT is_system ORDER BY id;
