-- +goose Up
-- The relay's claim, made independent of the table's statistics and
-- cheaper per candidate. See docs/outbox.md (Relay) and docs/benchmarks.md.
SET LOCAL ROLE jejak_owner;

-- The per-aggregate order test ("is an older message of this aggregate
-- still undelivered?") runs once per claim candidate, and every claim adds
-- an entry to its index. Keyed on the text columns, both spent most of
-- their time comparing strings under the database collation; keyed on a
-- 64-bit hash of the aggregate they compare integers. The claim still
-- checks the real columns on the rows the hash finds, so a collision costs
-- a heap visit, never a wrong answer.
DROP INDEX outbox_aggregate_idx;
CREATE INDEX outbox_aggregate_key_idx
    ON outbox_messages (hashtextextended(aggregate_type || ':' || aggregate_id, tenant_id), id)
    WHERE state <> 'delivered';

-- The claim's candidates: due pending messages in id order whose aggregate
-- has no older undelivered message, locked with SKIP LOCKED. The only good
-- plan is the pending index in id order with one probe per candidate,
-- stopping at lim; but when the table has no statistics yet (a new
-- database, or a burst into a table analysed while nearly empty) the
-- planner estimates a few dozen rows and picks a hash anti-join over the
-- whole table plus a sort: 150 ms per claim at 50,000 pending rows, growing
-- with the backlog. A function can pin the plan with its own settings,
-- which apply only while it runs.
-- +goose StatementBegin
CREATE FUNCTION outbox_claimable(lim int, at timestamptz) RETURNS bigint[]
LANGUAGE sql VOLATILE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
SET enable_hashjoin = off SET enable_mergejoin = off
AS $$
SELECT coalesce(array_agg(id), '{}') FROM (
    SELECT c.id
      FROM outbox_messages c
     WHERE c.state = 'pending'
       AND c.available_at <= at
       AND NOT EXISTS (
           SELECT 1 FROM outbox_messages o
            WHERE hashtextextended(o.aggregate_type || ':' || o.aggregate_id, o.tenant_id)
                = hashtextextended(c.aggregate_type || ':' || c.aggregate_id, c.tenant_id)
              AND o.id < c.id AND o.state <> 'delivered'
              AND o.tenant_id = c.tenant_id AND o.aggregate_type = c.aggregate_type
              AND o.aggregate_id = c.aggregate_id)
     ORDER BY c.id
     LIMIT lim
       FOR UPDATE OF c SKIP LOCKED) claimable
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION outbox_claimable(int, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox_claimable(int, timestamptz) TO jejak_system;
