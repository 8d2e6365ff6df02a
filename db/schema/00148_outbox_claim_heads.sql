-- +goose Up
-- The relay's claim no longer walks the whole backlog when its front is
-- blocked, and becomes PL/pgSQL: as a SQL function with its own planner
-- settings it was planned on every claim (0.24 ms on an empty outbox; see
-- 00147). Its settings still apply to every plan made while it runs, the
-- cached ones included: the plans it pins are made inside the function.
--
-- outbox_claimable walked the pending messages in id order and probed,
-- for each, whether an older message of its aggregate was undelivered.
-- When the oldest messages are the second, third, ... of aggregates whose
-- first is in flight (a relay publishing it), every one of them is a
-- probe that finds it blocked: with 500 customers' points in a backlog of
-- 7,000 (the replicas benchmark), each claim probed all 7,000 to find the
-- few heads not in flight, 18-35 ms a claim, and after the job engine got
-- faster the relay's claims were the largest cost on the database.
--
-- Each probe goes through outbox_aggregate_key_idx: on a table with no
-- statistics the planner had taken the primary key (tenant_id, id), which
-- reads every older message of the tenant per candidate.
--
-- The walk looks at the oldest 256 pending messages first. When fewer
-- than a quarter of them can move and more are pending, the claim lists
-- the aggregates instead: the oldest undelivered message of each
-- aggregate key, one probe of outbox_aggregate_key_idx per aggregate (a
-- loose index scan), and takes the oldest of those heads that are pending
-- and due. Otherwise the walk goes on: most of what it probes can move. A head is the oldest undelivered message of its key,
-- so no older message of its aggregate can wait. Two aggregates whose
-- 64-bit keys collide share one head until it is delivered: a delay for
-- the other, never a message out of order. With more aggregates waiting
-- than 1,024 or four per message asked for, listing them all would cost
-- more than the walk, and the claim walks everything as before.
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
