-- Job engine queries. Every reading of time is
-- coalesce(the now parameter::timestamptz, now()): production passes NULL
-- (one database clock for all replicas), tests pass a frozen instant.

-- name: JobInsertMany :many
-- Enqueue one or many jobs in one round trip. Nullable values arrive as
-- sentinels (epoch, zero, empty string) because the arrays cannot carry NULLs through
-- the generated types. Idempotency conflicts are skipped; the caller looks up the
-- existing job. Rows are produced in input order, so ids ascend with it.
WITH ins AS (
INSERT INTO jobs (tenant_id, kind, queue, priority, payload, max_attempts,
                  available_at, created_at, trace_id, requested_by, requested_at,
                  expires_at, idempotency_key, payload_hash)
SELECT u.tenant_id, u.kind, u.queue, u.priority, u.payload::jsonb, u.max_attempts,
       coalesce(nullif(u.available_at, 'epoch'::timestamptz), sqlc.narg('now')::timestamptz, now()),
       coalesce(sqlc.narg('now')::timestamptz, now()),
       coalesce(nullif(u.trace_id, ''), replace(gen_random_uuid()::text, '-', '')),
       nullif(u.requested_by, 0),
       coalesce(sqlc.narg('now')::timestamptz, now()),
       nullif(u.expires_at, 'epoch'::timestamptz),
       nullif(u.idempotency_key, ''),
       -- Replaced by the payload MAC in the jobs_sign_payload trigger.
       ''::bytea
FROM (SELECT unnest(@tenant_ids::bigint[]) AS tenant_id, unnest(@kinds::text[]) AS kind,
             unnest(@queues::text[]) AS queue, unnest(@priorities::smallint[]) AS priority,
             unnest(@payloads::text[]) AS payload, unnest(@max_attempts::int[]) AS max_attempts,
             unnest(@available_ats::timestamptz[]) AS available_at,
             unnest(@trace_ids::text[]) AS trace_id, unnest(@requested_bys::bigint[]) AS requested_by,
             unnest(@expires_ats::timestamptz[]) AS expires_at,
             unnest(@idempotency_keys::text[]) AS idempotency_key) u
ON CONFLICT (tenant_id, kind, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id, tenant_id, kind, idempotency_key, trace_id, created_at, requested_by
), traced AS (
    -- The forensics index by trace (job_traces), written by this statement
    -- rather than by a transition-table trigger (migration 00161 says why).
    INSERT INTO job_traces (trace_id, job_id, tenant_id, created_at, requested_by)
    SELECT trace_id, id, tenant_id, created_at, requested_by FROM ins
), counted AS (
    -- The overview's unfinished count: appended, never upserted, because
    -- this runs in the caller's transaction (see job_count_deltas).
    INSERT INTO job_count_deltas (tenant_id, kind, unfinished)
    SELECT tenant_id, kind, count(*) FROM ins GROUP BY tenant_id, kind
)
SELECT id, tenant_id, kind, idempotency_key FROM ins;

-- name: JobGetByIdempotencyKey :one
SELECT id FROM jobs WHERE tenant_id = $1 AND kind = $2 AND idempotency_key = $3;

-- The fair batch claim lives in internal/job/claim.sql: sqlc's analyzer
-- cannot follow its recursive CTE and lateral LIMIT.

-- name: JobSetCompletedMany :many
-- Batched completion of jobs this worker holds. Each id comes with the
-- attempt it was claimed as: (worker, attempt) is the claim token, so a
-- late completion of an earlier attempt can never finish a later one,
-- even when the same worker claimed both.
--
-- Held-job checks in this file test "lease_expires_at IS NOT NULL" rather
-- than "state = running": the two are equivalent (a lease exists exactly
-- while a job runs: the CHECK constraint and every transition out of
-- running clear it), but the planner cannot match the former to
-- jobs_running_idx. With stale statistics that claim "almost nothing is
-- running" it would otherwise walk that index instead of the primary key.
--
-- Each job is addressed by its primary key (tenant_id, id): the engine
-- holds every claimed job's tenant, and under Citus the statement then
-- names the shards it touches.
--
-- The same statement adds the batch to the dashboard's per-minute rollup
-- (job_stats_minute): no extra round trip, and the count commits exactly
-- with the state change.
WITH done AS (
    UPDATE jobs
       SET state = 'succeeded', finished_at = coalesce(sqlc.narg('now')::timestamptz, now()),
           lease_expires_at = NULL
      FROM (SELECT unnest(@tenant_ids::bigint[]) AS tenant_id, unnest(@ids::bigint[]) AS id,
                   unnest(@attempts::int[]) AS attempt) AS held
     WHERE jobs.tenant_id = held.tenant_id AND jobs.id = held.id AND jobs.attempt = held.attempt
       AND jobs.lease_expires_at IS NOT NULL AND jobs.worker_id = @worker_id::text
    RETURNING jobs.id, jobs.tenant_id, jobs.kind
), counted AS (
    INSERT INTO job_stats_minute (tenant_id, minute, kind, shard, succeeded)
    SELECT tenant_id, date_trunc('minute', coalesce(sqlc.narg('now')::timestamptz, now()), 'UTC'), kind,
           stats_shard(), count(*)
      FROM done GROUP BY tenant_id, kind
      ORDER BY tenant_id, kind
    ON CONFLICT (tenant_id, minute, kind, shard) DO UPDATE
       SET succeeded = job_stats_minute.succeeded + EXCLUDED.succeeded
), uncounted AS (
    INSERT INTO job_count_deltas (tenant_id, kind, unfinished)
    SELECT tenant_id, kind, -count(*) FROM done GROUP BY tenant_id, kind
)
SELECT id FROM done;

-- name: JobSetCompleted :many
-- One job, fenced by its claim token; counted in the rollup like
-- JobSetCompletedMany.
WITH done AS (
    UPDATE jobs
       SET state = 'succeeded', finished_at = coalesce(sqlc.narg('now')::timestamptz, now()),
           lease_expires_at = NULL
     WHERE jobs.tenant_id = @tenant_id AND jobs.id = @id AND attempt = @attempt
       AND lease_expires_at IS NOT NULL AND worker_id = @worker_id::text
    RETURNING id, tenant_id, kind
), counted AS (
    INSERT INTO job_stats_minute (tenant_id, minute, kind, shard, succeeded)
    SELECT tenant_id, date_trunc('minute', coalesce(sqlc.narg('now')::timestamptz, now()), 'UTC'), kind,
           stats_shard(), 1
      FROM done
    ON CONFLICT (tenant_id, minute, kind, shard) DO UPDATE
       SET succeeded = job_stats_minute.succeeded + 1
), uncounted AS (
    INSERT INTO job_count_deltas (tenant_id, kind, unfinished)
    SELECT tenant_id, kind, -1 FROM done
)
SELECT id FROM done;

-- name: JobGetHeld :one
-- The attempt (and tenant) of a job a worker holds, by id alone: for
-- callers that know neither (Engine.Complete, Engine.Fail). A held job is
-- running, so it is found through jobs_running_idx (few rows: bounded by
-- the workers); the id index leaves running jobs out.
SELECT tenant_id, attempt, max_attempts FROM jobs
 WHERE id = @id AND state = 'running' AND worker_id = @worker_id::text;

-- name: JobSetFailed :one
-- Record a failed attempt. Transient failures go back to pending after
-- backoff_seconds unless attempts are used up; permanent and policy
-- failures are dead at once, policy ones flagged. Every attempt is appended
-- to the errors history. The attempt counts itself in the dashboard's
-- per-minute rollup in the same statement (a dead letter counts as a
-- failure too).
WITH failed AS (
    UPDATE jobs
       SET state = CASE WHEN @class::text = 'transient' AND attempt < max_attempts
                        THEN 'pending' ELSE 'dead' END,
           available_at = CASE WHEN @class::text = 'transient' AND attempt < max_attempts
                               THEN coalesce(sqlc.narg('now')::timestamptz, now()) + make_interval(secs => @backoff_seconds::float8)
                               ELSE available_at END,
           finished_at = CASE WHEN @class::text = 'transient' AND attempt < max_attempts
                              THEN NULL ELSE coalesce(sqlc.narg('now')::timestamptz, now()) END,
           lease_expires_at = NULL,
           last_error = @error::text,
           error_class = @class::text,
           flagged = flagged OR @class::text = 'policy',
           errors = coalesce(errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
               'attempt', attempt, 'at', coalesce(sqlc.narg('now')::timestamptz, now()),
               'worker', worker_id, 'class', @class::text, 'error', @error::text))
     WHERE jobs.tenant_id = @tenant_id AND jobs.id = @id AND attempt = @attempt
       AND lease_expires_at IS NOT NULL AND worker_id = @worker_id::text
    RETURNING id, state, available_at, finished_at, tenant_id, kind, flagged
), counted AS (
    INSERT INTO job_stats_minute (tenant_id, minute, kind, shard, failed, dead)
    SELECT tenant_id, date_trunc('minute', coalesce(sqlc.narg('now')::timestamptz, now()), 'UTC'), kind,
           stats_shard(), 1, CASE WHEN state = 'dead' THEN 1 ELSE 0 END
      FROM failed
    ON CONFLICT (tenant_id, minute, kind, shard) DO UPDATE
       SET failed = job_stats_minute.failed + 1, dead = job_stats_minute.dead + EXCLUDED.dead
), grouped AS (
    -- A dead letter joins its group for the dead-letter page and leaves
    -- the unfinished count.
    INSERT INTO job_dead_groups AS g (tenant_id, kind, error_class, n, flagged, last_at, last_id)
    SELECT tenant_id, kind, @class::text, 1, CASE WHEN flagged THEN 1 ELSE 0 END, finished_at, id
      FROM failed WHERE state = 'dead'
    ON CONFLICT (tenant_id, kind, error_class) DO UPDATE
       SET n = g.n + 1, flagged = g.flagged + EXCLUDED.flagged,
           last_at = greatest(g.last_at, EXCLUDED.last_at), last_id = greatest(g.last_id, EXCLUDED.last_id)
), uncounted AS (
    INSERT INTO job_count_deltas (tenant_id, kind, unfinished)
    SELECT tenant_id, kind, -1 FROM failed WHERE state = 'dead'
)
SELECT state, available_at FROM failed;

-- name: JobRescueExpired :many
-- Jobs whose worker stopped extending the lease (crashed, partitioned):
-- retried now, or dead when the attempt was the last one. The lost attempt
-- is recorded in the history like any transient failure. Those that die
-- join their dead-letter group and leave the unfinished count.
WITH rescued AS (
UPDATE jobs
   SET state = CASE WHEN attempt < max_attempts THEN 'pending' ELSE 'dead' END,
       available_at = CASE WHEN attempt < max_attempts
                           THEN coalesce(sqlc.narg('now')::timestamptz, now()) ELSE available_at END,
       finished_at = CASE WHEN attempt < max_attempts
                          THEN NULL ELSE coalesce(sqlc.narg('now')::timestamptz, now()) END,
       lease_expires_at = NULL,
       last_error = 'lease expired: worker ' || worker_id || ' stopped heartbeating',
       error_class = 'transient',
       errors = coalesce(errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
           'attempt', attempt, 'at', coalesce(sqlc.narg('now')::timestamptz, now()),
           'worker', worker_id, 'class', 'transient',
           'error', 'lease expired: worker ' || worker_id || ' stopped heartbeating'))
 WHERE state = 'running' AND lease_expires_at < coalesce(sqlc.narg('now')::timestamptz, now())
RETURNING id, state, tenant_id, kind, flagged, finished_at
), grouped AS (
    INSERT INTO job_dead_groups AS g (tenant_id, kind, error_class, n, flagged, last_at, last_id)
    SELECT tenant_id, kind, 'transient', count(*), count(*) FILTER (WHERE flagged), max(finished_at), max(id)
      FROM rescued WHERE state = 'dead'
     GROUP BY tenant_id, kind
     ORDER BY tenant_id, kind
    ON CONFLICT (tenant_id, kind, error_class) DO UPDATE
       SET n = g.n + EXCLUDED.n, flagged = g.flagged + EXCLUDED.flagged,
           last_at = greatest(g.last_at, EXCLUDED.last_at), last_id = greatest(g.last_id, EXCLUDED.last_id)
), uncounted AS (
    INSERT INTO job_count_deltas (tenant_id, kind, unfinished)
    SELECT tenant_id, kind, -count(*) FROM rescued WHERE state = 'dead' GROUP BY tenant_id, kind
)
SELECT id, state FROM rescued;

-- name: JobReleaseMany :execrows
-- Graceful shutdown: hand back jobs whose handler never started, without
-- consuming an attempt. Fenced by claim token like completion.
UPDATE jobs
   SET state = 'pending', attempt = greatest(jobs.attempt - 1, 0), lease_expires_at = NULL
  FROM (SELECT unnest(@tenant_ids::bigint[]) AS tenant_id, unnest(@ids::bigint[]) AS id,
               unnest(@attempts::int[]) AS attempt) AS held
 WHERE jobs.tenant_id = held.tenant_id AND jobs.id = held.id AND jobs.attempt = held.attempt
   AND jobs.lease_expires_at IS NOT NULL AND jobs.worker_id = @worker_id::text;

-- name: JobRenewLeases :many
-- The heartbeat renews the lease of every job this worker holds and learns
-- which it still holds: an id missing from the result was rescued (its
-- lease ran out while the worker could not reach the database) or taken
-- by an operator, and its handler must stop.
UPDATE jobs
   SET lease_expires_at = coalesce(sqlc.narg('now')::timestamptz, now()) + make_interval(secs => @lease_seconds::float8)
  FROM (SELECT unnest(@tenant_ids::bigint[]) AS tenant_id, unnest(@ids::bigint[]) AS id,
               unnest(@attempts::int[]) AS attempt) AS held
 WHERE jobs.tenant_id = held.tenant_id AND jobs.id = held.id AND jobs.attempt = held.attempt
   AND jobs.lease_expires_at IS NOT NULL AND jobs.worker_id = @worker_id::text
RETURNING jobs.id;

-- name: JobListDead :many
SELECT id, tenant_id, kind, queue, payload, attempt, max_attempts, last_error,
       error_class, flagged, finished_at, trace_id
  FROM jobs
 WHERE state = 'dead'
   AND (sqlc.narg('tenant_id')::bigint IS NULL OR tenant_id = sqlc.narg('tenant_id')::bigint)
 ORDER BY id
 LIMIT @max_rows::int;

-- name: JobGet :one
-- One job by id alone, whatever its tenant (the staff job page). The
-- primary key is (tenant_id, id), so the id is found through jobs_id_idx
-- (every job not running) or, for a running job, jobs_running_idx (few);
-- a job is in exactly one of the two branches. Under Citus this is a
-- lookup on every shard. payload_intact: the stored payload still matches
-- the MAC signed at enqueue with the server key (jobs_sign_payload).
SELECT j.*, job_payload_intact(j.id, j.tenant_id, j.kind, j.payload, j.payload_hash) AS payload_intact
  FROM ((SELECT * FROM jobs o WHERE o.id = @id AND o.state <> 'running')
        UNION ALL
        (SELECT * FROM jobs r WHERE r.id = @id AND r.state = 'running')) j
 LIMIT 1;

-- name: JobDeleteFinished :one
-- Retention in bounded slices so a prune never holds long locks. Pruned
-- dead letters leave their groups in the same statement.
WITH gone AS (
DELETE FROM jobs
 WHERE (tenant_id, id) IN (SELECT f.tenant_id, f.id FROM jobs f
               WHERE f.state = ANY(@states::text[])
                 AND f.finished_at < coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @older_than_seconds::float8)
               LIMIT @max_rows::int)
RETURNING tenant_id, kind, state, error_class, flagged
), ungrouped AS (
    -- An upsert in key order rather than an UPDATE ... FROM: rows are
    -- locked in the order inserted, the same order every writer of
    -- job_dead_groups uses, so two writers cannot deadlock.
    INSERT INTO job_dead_groups AS g (tenant_id, kind, error_class, n, flagged)
    SELECT tenant_id, kind, coalesce(error_class, ''), -count(*), -count(*) FILTER (WHERE flagged)
      FROM gone WHERE state = 'dead'
     GROUP BY 1, 2, 3
     ORDER BY 1, 2, 3
    ON CONFLICT (tenant_id, kind, error_class) DO UPDATE
       SET n = g.n + EXCLUDED.n, flagged = g.flagged + EXCLUDED.flagged
)
SELECT count(*)::bigint FROM gone;

-- name: JobNotify :exec
SELECT pg_notify('jejak_jobs', '');

-- name: JobWorkerUpsert :one
-- Registers the worker's beat and answers where it stands among the live
-- workers of its queues (a beat within live_seconds, with capacity): how
-- many they are counting itself, and how many of the others sort before
-- it. The claim's tenant affinity is taken from these two. The others
-- are counted apart from the worker's own row, which the insert (run
-- once, though nothing reads it) changes after this statement's snapshot.
WITH beat AS (
    INSERT INTO job_workers (worker_id, started_at, last_heartbeat, running, capacity, queues, leader)
    VALUES (@worker_id, coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now()),
            @running, @capacity, @queues::text[], @leader)
    ON CONFLICT (worker_id) DO UPDATE
       SET last_heartbeat = EXCLUDED.last_heartbeat, running = EXCLUDED.running,
           capacity = EXCLUDED.capacity, queues = EXCLUDED.queues, leader = EXCLUDED.leader
)
SELECT (1 + count(*))::int AS members,
       (count(*) FILTER (WHERE w.worker_id < @worker_id))::int AS rank
  FROM job_workers w
 WHERE w.worker_id <> @worker_id AND w.capacity > 0 AND w.queues && @queues::text[]
   AND w.last_heartbeat > coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @live_seconds::float8);

-- name: JobWorkerDelete :exec
DELETE FROM job_workers WHERE worker_id = $1;

-- name: JobWorkerDeleteStale :execrows
DELETE FROM job_workers
 WHERE last_heartbeat < coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => @older_than_seconds::float8);

-- name: JobWorkerList :many
SELECT * FROM job_workers ORDER BY worker_id;
