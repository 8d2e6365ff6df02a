-- The claim when little is due: if at most $4 jobs are due in the whole
-- table, every one of them fits in this batch, so taking them all (those of
-- this queue whose kind is not paused) is as fair as any split between
-- tenants, and the per-tenant walk of claim.sql is not needed. Otherwise
-- it claims nothing and says so, and the engine runs the fair claim.
-- The engine tries it only when its previous claim came back short (an
-- idle queue woken by NOTIFY or the poll): a busy queue never pays for it.
--
-- Parameters:
--   $1 now (NULL = the database clock)   $2 queue        $3 worker id
--   $4 batch size                        $5 lease (s)
--   $6 paused kinds (empty = none)
--
-- due looks at no more than $4 + 1 due pending jobs of any queue and kind,
-- in due-time order on jobs_pending_at_idx, without locking: its cost is
-- bounded by the batch whatever the backlog. fits is true when it found at
-- most $4. The result always has at least one row: (fits, NULL...) when
-- nothing was claimed, so the engine can tell "nothing due" from "too much
-- due for this path".
WITH due AS (
    SELECT j.tenant_id, j.id, j.queue, j.kind
      FROM jobs j
     WHERE j.state = 'pending' AND j.available_at <= coalesce($1::timestamptz, now())
     ORDER BY j.available_at
     LIMIT $4::int + 1
),
fits AS (
    SELECT count(*) <= $4::int AS ok FROM due
),
picked AS (
    SELECT j.tenant_id, j.id
      FROM jobs j
     -- The tenants as well as the ids, so a database distributed by
     -- tenant_id can route the lookup; ids are unique, so the tenant list
     -- only narrows it.
     WHERE j.tenant_id = ANY(ARRAY(SELECT due.tenant_id FROM due))
       AND j.id = ANY(ARRAY(SELECT due.id FROM due
                             WHERE due.queue = $2 AND due.kind <> ALL($6::text[])
                               AND (SELECT fits.ok FROM fits)))
       AND j.state = 'pending' AND j.available_at <= coalesce($1::timestamptz, now())
       FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE jobs
       SET state            = 'running',
           attempt          = jobs.attempt + 1,
           attempted_at     = coalesce($1::timestamptz, now()),
           worker_id        = $3::text,
           lease_expires_at = coalesce($1::timestamptz, now()) + make_interval(secs => $5::float8)
      FROM picked
     WHERE jobs.tenant_id = picked.tenant_id AND jobs.id = picked.id
    RETURNING jobs.id, jobs.tenant_id, jobs.kind, jobs.queue, jobs.priority, jobs.payload,
              jobs.attempt, jobs.max_attempts, jobs.available_at, jobs.created_at,
              jobs.attempted_at, jobs.trace_id, jobs.requested_by, jobs.requested_at,
              jobs.expires_at, jobs.idempotency_key, jobs.payload_hash, jobs.lease_expires_at,
              jobs.payload_version, jobs.replayed_by
),
-- Commits asynchronously, for the reasons claim.sql gives.
async AS (
    SELECT set_config('synchronous_commit', 'off', true) AS v
),
tampered AS (
    SELECT t.id
      FROM jobs_tampered_rows(ARRAY(SELECT c.id FROM claimed c), ARRAY(SELECT c.tenant_id FROM claimed c),
                              ARRAY(SELECT c.kind FROM claimed c), ARRAY(SELECT c.payload FROM claimed c),
                              ARRAY(SELECT c.payload_hash FROM claimed c)) AS t(id)
)
SELECT fits.ok,
       claimed.id, claimed.tenant_id, claimed.kind, claimed.queue, claimed.priority, claimed.payload,
       claimed.attempt, claimed.max_attempts, claimed.available_at, claimed.created_at,
       claimed.attempted_at, claimed.trace_id, claimed.requested_by, claimed.requested_at,
       claimed.expires_at, claimed.idempotency_key, claimed.payload_hash, claimed.lease_expires_at,
       claimed.payload_version, claimed.replayed_by,
       NOT EXISTS (SELECT 1 FROM tampered WHERE tampered.id = claimed.id) AS intact
  FROM async CROSS JOIN fits LEFT JOIN claimed ON true
