-- +goose Up
-- The claim's walk no longer probes outbox_aggregate_key_idx for every
-- candidate. Each probe looked for the undelivered message before the
-- candidate in its aggregate's key, and passed on its way the index
-- entries of every message of that key delivered since the index last
-- killed them, each a heap visit; entries are killed only once no open
-- transaction can see the row, and the claim's own transaction is among
-- the oldest. A claim of 1,000 over 500 aggregates whose 40,000 earlier
-- messages had been delivered under a held snapshot read 89,917 buffers
-- (37-52 ms); the walk without probes read 2,896 (11-14 ms). In the replicas
-- benchmark the relay's claims kept a database session busy the whole run.
--
-- The walk starts at the oldest pending message, so for any candidate
-- every older pending message of its key has been walked before it: the
-- walk itself knows which of them it took. What it cannot see are the
-- key's messages that are not pending: in flight (processing: read once a
-- claim, a few batches at most) and failed (outbox_failed_key_idx, below:
-- failed rows seldom change, so it holds no dead entries to pass). A
-- candidate is taken when its key has no message in flight or failed
-- before it, no pending message before it that the walk did not take
-- (not yet due, or beyond a run's 64), and its run is under 64: what
-- 00163 took, without a probe. The walk looks at pending messages a chunk
-- at a time in one statement, carrying each key's run from chunk to
-- chunk; not-yet-due messages are walked too (they hold their keys back).
--
-- Messages in flight are read before the chunks, each statement with its
-- own snapshot; only claims make a message processing, and claims take
-- turns (00157), so what changes meanwhile is a message settled or
-- released, which at worst holds its key back until the next claim. Per
-- aggregate order is id order, as it always was: a message committed
-- after a later message of its aggregate was claimed goes out after it,
-- whether it committed after the claim's snapshot (as before) or after
-- the walk passed its id in an earlier chunk.
--
-- The batch is chosen shallowest first: the walk reads twice the batch
-- asked for and takes every key's next message, then every key's second,
-- and so on, the oldest first at each depth, instead of the oldest
-- messages whatever their depth. The relay publishes a batch one message
-- an aggregate at a time, a round trip each; behind a backlog whose keys'
-- messages came in bursts (the replicas benchmark), batches of 1,000 in
-- id order took 8.6-11.4 rounds on average, shallowest first 6.4-6.8.
--
-- The front heuristic stays (00148): after the first chunk, with fewer than a
-- quarter of what was walked taken, the claim lists the aggregates' heads
-- instead, once; with too many aggregates it walks on.
SET LOCAL ROLE jejak_owner;

CREATE INDEX outbox_failed_key_idx
    ON outbox_messages (hashtextextended(aggregate_type || ':' || aggregate_id, tenant_id), id)
    WHERE state = 'failed';

-- +goose StatementBegin
-- The claim's heads path (00148, 00163), with the planner settings it was
-- tuned under: the oldest pending heads of the aggregate keys, each with
-- its run, or NULL when there are more than max_heads keys to list.
CREATE FUNCTION outbox_claimable_heads(lim int, at timestamptz, max_run int) RETURNS bigint[]
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_nestloop = on
AS $$
DECLARE
    max_heads constant int := greatest(1024, lim * 4);
    ids bigint[] := '{}';
    heads bigint[];
    h record;
    r record;
BEGIN
    -- The head of every aggregate key, up to max_heads of them (one more
    -- tells that there are more).
    WITH RECURSIVE k(h, id, n) AS (
        (SELECT hashtextextended(o.aggregate_type || ':' || o.aggregate_id, o.tenant_id), o.id, 1
           FROM outbox_messages o
          WHERE o.state <> 'delivered'
          ORDER BY 1, 2 LIMIT 1)
        UNION ALL
        SELECT x.h, x.id, k.n + 1 FROM k CROSS JOIN LATERAL (
            SELECT hashtextextended(o.aggregate_type || ':' || o.aggregate_id, o.tenant_id) AS h, o.id
              FROM outbox_messages o
             WHERE o.state <> 'delivered'
               AND hashtextextended(o.aggregate_type || ':' || o.aggregate_id, o.tenant_id) > k.h
             ORDER BY 1, 2 LIMIT 1) x
         WHERE k.n <= max_heads
    )
    SELECT array_agg(k.id) INTO heads FROM k;
    IF coalesce(cardinality(heads), 0) > max_heads THEN
        RETURN NULL;
    END IF;
    -- The heads that can move, oldest first, each with its run: the key's
    -- next messages while they are pending and due.
    FOR h IN SELECT o.id, hashtextextended(o.aggregate_type || ':' || o.aggregate_id, o.tenant_id) AS k
               FROM outbox_messages o
              WHERE o.id = ANY(coalesce(heads, '{}')) AND o.state = 'pending' AND o.available_at <= at
              ORDER BY o.id
    LOOP
        FOR r IN SELECT o.id, o.state = 'pending' AND o.available_at <= at AS ready
                   FROM outbox_messages o
                  WHERE hashtextextended(o.aggregate_type || ':' || o.aggregate_id, o.tenant_id) = h.k
                    AND o.id >= h.id AND o.state <> 'delivered'
                  ORDER BY hashtextextended(o.aggregate_type || ':' || o.aggregate_id, o.tenant_id), o.id
                  LIMIT least(max_run, lim - cardinality(ids))
        LOOP
            EXIT WHEN NOT r.ready;
            ids := ids || r.id;
        END LOOP;
        EXIT WHEN cardinality(ids) >= lim;
    END LOOP;
    RETURN (SELECT coalesce(array_agg(x ORDER BY x), '{}') FROM unnest(ids) x);
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_claimable_unlocked(lim int, at timestamptz) RETURNS bigint[]
LANGUAGE plpgsql VOLATILE
-- Index paths only, whatever the statistics say; the joins of a chunk to
-- the keys it carries are hash joins (a nested loop over an unnested
-- array rescans it for every row).
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_mergejoin = off SET enable_nestloop = off
AS $$
DECLARE
    -- The longest run taken of one aggregate: the relay publishes a run
    -- one message a round trip, and the batch is settled when its longest
    -- run is out.
    max_run constant int := 64;
    -- The first chunk is twice the batch asked for (a claim of a few
    -- reads a few), so that the batch can be chosen shallowest first
    -- (below); later ones double, so a long walk is a few statements.
    chunk int := greatest(lim * 2, 32);
    busy_keys bigint[];
    busy_first bigint[];
    -- Each walked key's run so far; max_run once the walk left one of
    -- its messages behind.
    seen_keys bigint[] := '{}';
    seen_runs int[] := '{}';
    -- What the walk could take so far, each with its depth in its
    -- key's run (1: the key's next message).
    cand_ids bigint[] := '{}';
    cand_depths int[] := '{}';
    took_ids bigint[];
    took_depths int[];
    n int;
    last bigint;
    after bigint := 0;
    examined int := 0;
    listed boolean := false;
    heads bigint[];
BEGIN
    SELECT coalesce(array_agg(b.k), '{}'), coalesce(array_agg(b.first), '{}') INTO busy_keys, busy_first
      FROM (SELECT hashtextextended(o.aggregate_type || ':' || o.aggregate_id, o.tenant_id) AS k, min(o.id) AS first
              FROM outbox_messages o
             WHERE o.state = 'processing'
             GROUP BY 1) b;
    LOOP
        WITH c AS (
            SELECT m.id, hashtextextended(m.aggregate_type || ':' || m.aggregate_id, m.tenant_id) AS k,
                   m.available_at <= at AS due
              FROM outbox_messages m
             WHERE m.state = 'pending' AND m.id > after
             ORDER BY m.id
             LIMIT chunk
        ), keys AS MATERIALIZED (
            -- Each key of the chunk: its run so far and its oldest message
            -- in flight or failed.
            SELECT ck.k, coalesce(s.run, 0) AS run,
                   least(p.first, (SELECT o.id FROM outbox_messages o
                                    WHERE hashtextextended(o.aggregate_type || ':' || o.aggregate_id, o.tenant_id) = ck.k
                                      AND o.state = 'failed'
                                    ORDER BY hashtextextended(o.aggregate_type || ':' || o.aggregate_id, o.tenant_id), o.id
                                    LIMIT 1)) AS blocker
              FROM (SELECT DISTINCT c.k FROM c) ck
              LEFT JOIN unnest(seen_keys, seen_runs) s(k, run) ON s.k = ck.k
              LEFT JOIN unnest(busy_keys, busy_first) p(k, first) ON p.k = ck.k
        ), w AS (
            -- A key's messages are taken while each is due, under the run
            -- cap and before anything of its key in flight or failed: a
            -- prefix of the key's messages.
            SELECT c.id, c.k, keys.run, keys.run + row_number() OVER (PARTITION BY c.k ORDER BY c.id) AS depth,
                   keys.run + row_number() OVER (PARTITION BY c.k ORDER BY c.id) <= max_run
                   AND NOT bool_or(NOT c.due) OVER (PARTITION BY c.k ORDER BY c.id)
                   AND (keys.blocker IS NULL OR keys.blocker > c.id) AS ok
              FROM c JOIN keys ON keys.k = c.k
        ), runs AS (
            SELECT w.k, CASE WHEN bool_and(w.ok) THEN max(w.run) + count(*)::int ELSE max_run END AS run
              FROM w GROUP BY w.k
        ), state AS (
            SELECT coalesce(runs.k, s.k) AS k, coalesce(runs.run, s.run) AS run
              FROM runs FULL JOIN unnest(seen_keys, seen_runs) s(k, run) ON s.k = runs.k
        )
        SELECT (SELECT coalesce(array_agg(w.id ORDER BY w.id), '{}') FROM w WHERE w.ok),
               (SELECT coalesce(array_agg(w.depth::int ORDER BY w.id), '{}') FROM w WHERE w.ok),
               st.keys, st.runs, (SELECT count(*) FROM c), (SELECT max(c.id) FROM c)
          INTO took_ids, took_depths, seen_keys, seen_runs, n, last
          FROM (SELECT coalesce(array_agg(state.k ORDER BY state.k), '{}') AS keys,
                       coalesce(array_agg(state.run ORDER BY state.k), '{}') AS runs
                  FROM state) st;
        cand_ids := cand_ids || took_ids;
        cand_depths := cand_depths || took_depths;
        EXIT WHEN cardinality(cand_ids) >= lim OR n < chunk;
        examined := examined + n;
        after := last;
        chunk := least(chunk * 2, 8192);
        CONTINUE WHEN listed OR cardinality(cand_ids) * 4 >= examined;

        listed := true;
        heads := outbox_claimable_heads(lim, at, max_run);
        CONTINUE WHEN heads IS NULL;
        RETURN heads;
    END LOOP;
    -- The batch: the shallowest first, then the oldest. The relay
    -- publishes a batch one message an aggregate at a time, a round trip
    -- each, so a batch of the keys' next messages goes out in fewer rounds
    -- than one of a few keys' long runs. A key's taken messages are still
    -- a prefix of its run: the batch takes every depth up to a last one.
    RETURN (SELECT coalesce(array_agg(x.id ORDER BY x.id), '{}')
              FROM (SELECT u.id FROM unnest(cand_ids, cand_depths) u(id, depth)
                     ORDER BY u.depth, u.id LIMIT lim) x);
END
$$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION outbox_claimable_heads(int, timestamptz, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox_claimable_heads(int, timestamptz, int) TO jejak_system;
