-- The fair batch claim (each tenant with due work gets a share of the
-- batch, round robin, so one tenant cannot starve the others), one
-- statement per batch.
-- Kept here rather than in db/query because sqlc's analyzer cannot follow
-- the recursive CTE and the lateral LIMIT; store.go runs it and scans rows.
--
-- Parameters:
--   $1 now (NULL = the database clock)   $2 queue        $3 worker id
--   $4 batch size                        $5 lease (s)    $6 tenant cursor
--   $7 max tenants visited               $8 minimum per-tenant share
--   $9 per-tenant cap on the queue's running jobs (0 = none)
--   $10 fair: round robin across tenants (false = strict priority/due order)
--   $11 maximum per-tenant share
--   $12, $13 the slot: this claim serves the tenants of share $13 of $12
--       (tenant_in_slot, migration 00168; 1 and 0: every tenant)
--   $14 paused kinds: their jobs are passed over. When none is paused the
--       engine runs this statement without that line and parameter
--       (claimAnyKindSQL), as a prepared statement with its generic plan
--       forced: plan_cache_mode, set for the claim's implicit transaction
--       by a statement sent before it in the same batch (store.go), so
--       each connection plans it once, and again after an ANALYZE of jobs.
--       Left to choose, PostgreSQL keeps the generic plan only while it
--       estimates it no dearer than the custom ones, and planned again on
--       every claim otherwise: with a near-empty queue (the web server's:
--       about half the claims, each plan costing about what the claim
--       did), and for seconds after a burst's ANALYZE (four replicas
--       planned it 779 times in 1,338 claims, 40 % of their planning
--       time). The generic plan is the right one
--       only without the filter: `kind <> ALL($14)` over a table where one
--       kind dominates is estimated to keep almost nothing, and the plan
--       then reads each tenant's whole range through a bitmap and sorts it
--       (15x slower).
--
-- The claim commits asynchronously (synchronous_commit off for its own
-- implicit transaction, set by the async CTE; the pooled connection keeps
-- its setting). The producer claims serially, so the WAL flush it no
-- longer waits for is taken off every batch and off an idle job's start.
-- What a crash can lose is only the claim itself, and only when nothing
-- committed synchronously after it: any later flush (a completion, a
-- handler's transaction) writes the claim's commit record too, since it
-- precedes them in the WAL. A lost claim leaves its jobs pending with the
-- attempt not counted, and they run again: the at-least-once a crash gives
-- anyway (lease rescue), without waiting for the lease to expire.
--
-- 1) tenant_walk: the distinct tenants with due work in this queue, found
--    by a recursive "loose index scan" over jobs_claim_idx (one index probe
--    per tenant, however many jobs each has), starting after a round-robin
--    cursor and visiting at most $7. Each probe starts at the next id of
--    the slot's share (tenant_slot_after: every $12-th id), so the
--    walk steps over the other slots' tenants without reading their
--    entries; a probe that lands on another slot's tenant (the id it
--    aimed at has no due work) counts as a visit but gets no share.
--    Each probe orders by the whole of
--    jobs_claim_idx's key, not just tenant_id: any other index leading
--    with tenant_id (jobs_tenant_idx holds finished jobs too) also gives
--    tenant order and is smaller, so the planner would pick it and walk
--    past every succeeded job of a tenant to find the next one (50k
--    buffers per claim at 70k finished jobs, growing with them). Each
--    probe keeps the key of the first due job it found.
-- 2) quota: each gets an equal share of the batch (at least $8, at most
--    $11: a walk that reached the last tenant before visiting $7 of them
--    must not hand the few it found the whole batch), less its
--    running jobs of the queue when a per-tenant cap is set.
-- 3) candidates: each tenant's head jobs in priority, due-time, id order,
--    starting at the key its walk probe found: every entry before it is
--    a job already claimed (a dead index entry until vacuum) or not due,
--    and while a queue drains those pile up at the head of every tenant's
--    range, so scanning them once (in the walk) rather than twice halves
--    what a claim reads there (2.7x less CPU per claim at 60k claimed of
--    200k). Locked with SKIP LOCKED so concurrent claimers never collide, ranked
--    within their tenant by one sort of the whole set (a rank computed
--    inside the LATERAL sorted each tenant's rows separately: one sort per
--    tenant, a cost that grew with the number of tenants per batch).
-- 4) picked: the batch by priority, then rank within the tenant (round
--    robin across tenants), then due time; marked running with a lease.
--    Rows are updated by primary key (tenant_id, id). Each comes back
--    with the database's check of its payload MAC (tampered: one
--    jobs_tampered_rows call for the whole batch, over the values the
--    UPDATE returned rather than a second read of the rows): the handler
--    gets exactly this payload, so checking it here is checking it at
--    start, without another round trip.
-- 5) walk: how many tenants the walk visited and the last one, returned
--    with every row (and alone, with NULL job columns, when nothing was
--    claimed), with each row's tenant quota and the share: the engine
--    continues the round robin after the last tenant visited, and skips
--    the refill pass when the walk saw every tenant and none used its
--    whole quota (nothing more is due), which is what an idle queue's
--    claim looks like, or used a quota the per-tenant cap cut below the
--    share (a refill would find its places taken).
WITH RECURSIVE tenant_walk AS (
    (SELECT j.tenant_id, j.priority, j.available_at, j.id, 1 AS n
       FROM jobs j
      WHERE j.state = 'pending' AND j.queue = $2
        AND j.tenant_id >= tenant_slot_after($6::bigint, $12::int, $13::int)
        AND j.available_at <= coalesce($1::timestamptz, now())
      ORDER BY j.tenant_id, j.queue, j.priority, j.available_at, j.id
      LIMIT 1)
    UNION ALL
    SELECT nx.tenant_id, nx.priority, nx.available_at, nx.id, w.n + 1
      FROM tenant_walk w
     CROSS JOIN LATERAL (
        SELECT j.tenant_id, j.priority, j.available_at, j.id
          FROM jobs j
         WHERE j.state = 'pending' AND j.queue = $2
           AND j.tenant_id >= tenant_slot_after(w.tenant_id, $12::int, $13::int)
           AND j.available_at <= coalesce($1::timestamptz, now())
         ORDER BY j.tenant_id, j.queue, j.priority, j.available_at, j.id
         LIMIT 1
     ) nx
     WHERE w.n < $7::int
),
quota AS (
    SELECT w.tenant_id, w.priority, w.available_at, w.id,
           CASE WHEN $9::int > 0
                THEN least(s.share, greatest(0, $9::int - (
                        SELECT count(*) FROM jobs r
                         WHERE r.tenant_id = w.tenant_id AND r.state = 'running' AND r.queue = $2)::int))
                ELSE s.share END AS k,
           s.share
      FROM tenant_walk w
     CROSS JOIN (SELECT least($11::int, greatest($8::int, ceil($4::int::numeric / greatest(count(t.tenant_id), 1))::int)) AS share
                   FROM tenant_walk t WHERE tenant_in_slot(t.tenant_id, $12::int, $13::int)) s
     WHERE tenant_in_slot(w.tenant_id, $12::int, $13::int)
),
candidates AS (
    SELECT q.tenant_id, c.id, c.priority, c.available_at, q.k, q.share,
           row_number() OVER (PARTITION BY q.tenant_id
                              ORDER BY c.priority, c.available_at, c.id) AS rank
      FROM quota q
     CROSS JOIN LATERAL (
        SELECT j.id, j.priority, j.available_at
          FROM jobs j
         WHERE j.tenant_id = q.tenant_id AND j.queue = $2 AND j.state = 'pending'
           AND (j.priority, j.available_at, j.id) >= (q.priority, q.available_at, q.id)
           AND j.available_at <= coalesce($1::timestamptz, now())
           AND j.kind <> ALL($14::text[]) -- paused kinds
         ORDER BY j.priority, j.available_at, j.id
         LIMIT q.k
         FOR UPDATE SKIP LOCKED
     ) c
),
picked AS (
    SELECT candidates.tenant_id, candidates.id, candidates.k, candidates.share
      FROM candidates
     ORDER BY candidates.priority, CASE WHEN $10::bool THEN candidates.rank ELSE 0 END,
              candidates.available_at, candidates.id
     LIMIT $4::int
),
walk AS (
    SELECT count(*)::int AS tenants, coalesce(max(tenant_walk.tenant_id), 0) AS last FROM tenant_walk
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
              jobs.payload_version, jobs.replayed_by, picked.k AS quota, picked.share
),
-- Commit without waiting for the WAL flush (see the header).
async AS (
    SELECT set_config('synchronous_commit', 'off', true) AS v
),
tampered AS (
    SELECT t.id
      FROM jobs_tampered_rows(ARRAY(SELECT c.id FROM claimed c), ARRAY(SELECT c.tenant_id FROM claimed c),
                              ARRAY(SELECT c.kind FROM claimed c), ARRAY(SELECT c.payload FROM claimed c),
                              ARRAY(SELECT c.payload_hash FROM claimed c)) AS t(id)
)
SELECT walk.tenants, walk.last,
       claimed.id, claimed.tenant_id, claimed.kind, claimed.queue, claimed.priority, claimed.payload,
       claimed.attempt, claimed.max_attempts, claimed.available_at, claimed.created_at,
       claimed.attempted_at, claimed.trace_id, claimed.requested_by, claimed.requested_at,
       claimed.expires_at, claimed.idempotency_key, claimed.payload_hash, claimed.lease_expires_at,
       claimed.payload_version, claimed.replayed_by,
       NOT EXISTS (SELECT 1 FROM tampered WHERE tampered.id = claimed.id) AS intact,
       claimed.quota, claimed.share
  FROM async CROSS JOIN walk LEFT JOIN claimed ON true
