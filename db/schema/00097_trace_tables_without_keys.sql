-- +goose Up
-- The trace side tables are written once per enqueued job (or traced
-- outbox message) and read only through their trace_id index (the
-- incident page) and their created_at BRIN (the alert rollup, pruning).
-- Their primary keys, (tenant_id, trace_id, job_id) and (tenant_id,
-- trace_id, message_id), served no read: they only asserted a uniqueness
-- the triggers give by construction (one row per inserted job or message).
-- Each cost a second random-order btree insert per enqueued row: about
-- 7 us of the 15 us the trace row adds to an enqueue (5,000-row enqueue
-- statements, 231 ms with the key, 195 ms without, on this 2-core machine).
-- Without a key they stay distributable by tenant_id (no unique index to
-- lead with it).
SET LOCAL ROLE jejak_owner;

ALTER TABLE job_traces DROP CONSTRAINT job_traces_pkey;
ALTER TABLE outbox_traces DROP CONSTRAINT outbox_traces_pkey;
