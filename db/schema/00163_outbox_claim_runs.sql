-- +goose Up
-- A claim takes each aggregate's waiting messages as a run, not only its
-- oldest. A message was claimable only when no older message of its
-- aggregate was undelivered, so a claim took one message an aggregate and
-- the next waited for that one's publish and settle: an aggregate moved
-- one message a round trip of the relay, and a busy one (a customer whose
-- points are awarded many times a second) built a backlog that every
-- later claim walked again, probing message after blocked message (one
-- sampled claim at two replicas walked 2,537 candidates for 500, 48,872
-- buffers; docs/benchmarks.md, 2026-12-06 19:05). The relay publishes a
-- batch's runs one message an aggregate at a time (internal/outbox,
-- Relay.publishRuns), so order still holds when a publish fails.
--
-- A candidate is claimable when the undelivered message before it in its
-- aggregate's key (one backward probe of outbox_aggregate_key_idx, as
-- before) is none or is already taken by this claim, up to 64 messages of
-- one aggregate a claim. The candidates come in id order, so a taken run
-- is always a prefix of what waits; when the front of the backlog is
-- blocked and the claim lists the aggregates' heads instead (00148), it
-- takes each free head with its run, the key's next messages while they
-- are pending and due. Messages that are processing, failed, or pending
-- but not yet due are never taken and so hold back everything after them.
-- Two aggregates whose 64-bit keys collide share one order: a delay,
-- never a message out of order.
--
-- The walk no longer locks its candidates (FOR UPDATE SKIP LOCKED locked
-- each row it returned): claims take turns (00157), and nothing else
-- changes a pending row, so the claim's UPDATE, which re-checks the state,
-- is all the locking a candidate needs.
SET LOCAL ROLE jejak_owner;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_claimable_unlocked(lim int, at timestamptz) RETURNS bigint[]
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
DECLARE
    -- After this many candidates, a claim that could take fewer than a
    -- quarter of them lists the aggregates instead (00148): listing costs
    -- a probe per aggregate, walking one per message examined.
    front constant int := 256;
    max_heads constant int := greatest(1024, lim * 4);
    -- Candidates are probed a chunk at a time, in one statement: a probe
    -- a statement of its own cost half again as much.
    chunk constant int := least(lim, front);
    -- The longest run taken of one aggregate: the relay publishes a run
    -- one message a round trip, and the batch is settled when its longest
    -- run is out.
    max_run constant int := 64;
    runs int[] := '{}';
    pos int;
    after bigint := 0;
    cids bigint[];
    prevs bigint[];
    examined int := 0;
    ids bigint[] := '{}';
    heads bigint[];
    h record;
    r record;
BEGIN
    <<walk>>
    LOOP
        -- The next candidates and, for each, the undelivered message
        -- before it in its key's order (NULL: none).
        SELECT coalesce(array_agg(c.id ORDER BY c.id), '{}'), coalesce(array_agg(p.id ORDER BY c.id), '{}')
          INTO cids, prevs
          FROM (SELECT m.id, hashtextextended(m.aggregate_type || ':' || m.aggregate_id, m.tenant_id) AS k
                  FROM outbox_messages m
                 WHERE m.state = 'pending' AND m.available_at <= at AND m.id > after
                 ORDER BY m.id
                 LIMIT chunk) c
          LEFT JOIN LATERAL (
                SELECT o.id FROM outbox_messages o
                 WHERE hashtextextended(o.aggregate_type || ':' || o.aggregate_id, o.tenant_id) = c.k
                   AND o.id < c.id AND o.state <> 'delivered'
                 ORDER BY hashtextextended(o.aggregate_type || ':' || o.aggregate_id, o.tenant_id) DESC, o.id DESC
                 LIMIT 1) p ON true;
        FOR i IN 1 .. cardinality(cids) LOOP
            pos := CASE WHEN prevs[i] IS NOT NULL THEN array_position(ids, prevs[i]) END;
            IF prevs[i] IS NULL OR runs[pos] < max_run THEN
                ids := ids || cids[i];
                runs := runs || coalesce(runs[pos] + 1, 1);
                EXIT walk WHEN cardinality(ids) >= lim;
            END IF;
            examined := examined + 1;
            CONTINUE WHEN examined <> front OR cardinality(ids) * 4 >= front;

            -- The front is blocked: the head of every aggregate key, up to
            -- max_heads of them (one more tells that there are more).
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

            IF coalesce(cardinality(heads), 0) <= max_heads THEN
                -- The heads that can move, oldest first, each with its run:
                -- the key's next messages while they are pending and due.
                ids := '{}';
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
            END IF;
            -- Too many aggregates to list: walk on through the whole backlog.
        END LOOP;
        EXIT walk WHEN cardinality(cids) < chunk;
        after := cids[cardinality(cids)];
    END LOOP;
    RETURN ids;
END
$$;
-- +goose StatementEnd
