-- +goose Up
-- The staff member whose retry put a dead letter back in the queue. The
-- engine reads it with the claim and, when set, records the replay's
-- outcome (succeeded, or dead again with its error) in the tenant's trail
-- in the transaction that finishes the job, so the tenant sees how the
-- retry they were told about ended. NULL for every job never replayed: a
-- nullable column without a default rewrites nothing and the hot enqueue
-- statement does not mention it.
SET LOCAL ROLE jejak_owner;

ALTER TABLE jobs ADD COLUMN replayed_by bigint;

