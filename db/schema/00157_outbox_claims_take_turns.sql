-- +goose Up
-- The relay's claims take turns across the cluster. Every replica runs
-- relay loops (two each by default) and each claimed at will: concurrent
-- claims walked the same oldest pending messages and listed the same
-- aggregate heads, probing every message another claim had just locked
-- before skipping it, and each took a share of what one claim would have
-- taken whole. With two replicas a claimed message cost 1.6-2.3 times the
-- buffers it cost with one, with four 2.5 times, and the relays' claims
-- were the largest cost on the database (docs/benchmarks.md, 2026-12-06
-- 12:05). Now outbox_claimable first takes a transaction-level advisory
-- lock (two-int form, classid 727279), held until the claim's statement
-- commits: a claim waits for the one before it (a few milliseconds) and
-- then sees its messages as processing, not pending. The lock is taken
-- before any row, and a claim never waits for a row (SKIP LOCKED), so it
-- cannot deadlock; publishing transactions and settle statements do not
-- take it. The function is otherwise as in 00148.
SET LOCAL ROLE jejak_owner;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_claimable(lim int, at timestamptz) RETURNS bigint[]
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
DECLARE
    -- The front sampled first, and the most heads listed: listing costs
    -- a probe per aggregate, walking one per message examined.
    front constant int := 256;
    max_heads constant int := greatest(1024, lim * 4);
    bound bigint;
    ids bigint[];
    heads bigint[];
BEGIN
    -- One claim at a time in the whole cluster: see the header.
    PERFORM pg_advisory_xact_lock(727279, 0);
    -- The front of the backlog: the id past its first messages (none when
    -- there are no more: the walk then sees them all).
    SELECT p.id INTO bound FROM outbox_messages p
     WHERE p.state = 'pending' ORDER BY p.id OFFSET front LIMIT 1;
    LOOP
        SELECT coalesce(array_agg(id), '{}') INTO ids FROM (
            SELECT c.id
              FROM outbox_messages c
             WHERE c.state = 'pending'
               AND c.available_at <= at
               AND c.id < coalesce(bound, 9223372036854775807)
               AND NOT EXISTS (
                   SELECT 1 FROM outbox_messages o
                    WHERE hashtextextended(o.aggregate_type || ':' || o.aggregate_id, o.tenant_id)
                        = hashtextextended(c.aggregate_type || ':' || c.aggregate_id, c.tenant_id)
                      AND o.id < c.id AND o.state <> 'delivered'
                      -- "+ 0": with no statistics the planner probed the
                      -- primary key (tenant_id, id < c.id), every older
                      -- message of the tenant per candidate; the key's
                      -- index is the only one left to probe.
                      AND o.tenant_id + 0 = c.tenant_id AND o.aggregate_type = c.aggregate_type
                      AND o.aggregate_id = c.aggregate_id)
             ORDER BY c.id
             LIMIT lim
               FOR UPDATE OF c SKIP LOCKED) claimable;
        IF bound IS NULL OR cardinality(ids) >= lim THEN
            RETURN ids;
        END IF;
        IF cardinality(ids) * 4 >= front THEN
            -- At least a quarter of the front can move: walking on finds
            -- the rest at a few probes each.
            bound := NULL;
            CONTINUE;
        END IF;

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
            SELECT coalesce(array_agg(id), '{}') INTO ids FROM (
                SELECT c.id
                  FROM outbox_messages c
                 WHERE c.id = ANY(coalesce(heads, '{}'))
                   AND c.state = 'pending'
                   AND c.available_at <= at
                 ORDER BY c.id
                 LIMIT lim
                   FOR UPDATE OF c SKIP LOCKED) claimable;
            RETURN ids;
        END IF;
        -- Too many aggregates to list: walk the whole backlog.
        bound := NULL;
    END LOOP;
END
$$;

-- +goose StatementEnd
