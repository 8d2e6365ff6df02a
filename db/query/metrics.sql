-- name: MetricsJobStates :many
-- The live job gauges per queue, one branch per partial index (claim,
-- running, dead) so succeeded and cancelled rows are never read. Oldest is
-- the due time of the queue's oldest due pending job, or as_of when none
-- is due (age 0). Called at most once per snapshot period, whatever the
-- scrape rate.
SELECT queue, 'pending'::text AS state, count(*)::bigint AS n,
       coalesce(min(available_at) FILTER (WHERE available_at <= coalesce(sqlc.narg('now')::timestamptz, now())),
                coalesce(sqlc.narg('now')::timestamptz, now()))::timestamptz AS oldest,
       coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS as_of
  FROM jobs WHERE state = 'pending' GROUP BY queue
UNION ALL
SELECT queue, 'running'::text, count(*)::bigint, coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz,
       coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz
  FROM jobs WHERE state = 'running' GROUP BY queue
UNION ALL
SELECT queue, 'dead'::text, count(*)::bigint, coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz,
       coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz
  FROM jobs WHERE state = 'dead' GROUP BY queue;
