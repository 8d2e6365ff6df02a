-- name: ScheduleRunClaim :one
INSERT INTO schedule_runs (name, period_key, period_start, ran_at, worker_id)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (name, period_key) DO NOTHING
RETURNING name;

-- name: ScheduleRunFinish :exec
UPDATE schedule_runs SET jobs = $3, summary = $4 WHERE name = $1 AND period_key = $2;

-- name: ScheduleRunLatest :many
-- Each named schedule's latest run, and the database's clock as of the
-- read, which the schedules' next runs are computed from: one round trip
-- for the status panel of every staff overview. A schedule that never ran
-- has no row; when none has, the one row carries only the clock (and an
-- empty name).
SELECT now()::timestamptz AS read_at, coalesce(r.name, '') AS name, coalesce(r.period_key, '') AS period_key,
       coalesce(r.period_start, now()) AS period_start, coalesce(r.ran_at, now()) AS ran_at,
       coalesce(r.worker_id, '') AS worker_id, coalesce(r.jobs, 0) AS jobs, coalesce(r.summary, '') AS summary
  FROM (SELECT 1) AS one
  LEFT JOIN LATERAL (
      SELECT DISTINCT ON (name) name, period_key, period_start, ran_at, worker_id, jobs, summary
        FROM schedule_runs
       WHERE name = ANY(@names::text[])
       ORDER BY name, period_start DESC) AS r ON true;

-- name: ScheduleTenantIDs :many
-- Customer tenants: the system tenant gets no per-tenant schedules.
SELECT id FROM tenants WHERE NOT is_system ORDER BY id;
