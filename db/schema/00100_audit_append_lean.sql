-- +goose Up
-- Two things every recorded event paid for and did not need:
-- * The v1 chain's unique (tenant_id, seq) indexed every new event too,
--   under a NULL seq. Only v1 events have a seq; a partial index keeps
--   their uniqueness and the sealer's seq-ordered read of them
--   (seq > n implies seq IS NOT NULL).
-- * The queue row's foreign key to tenants checked the tenant row again
--   (a KEY SHARE lock that every concurrent writer of the tenant takes)
--   for a row the queue trigger copies from an event whose own foreign key
--   has just checked it.
SET LOCAL ROLE jejak_owner;

ALTER TABLE audit_events DROP CONSTRAINT audit_events_v1_seq_key;
CREATE UNIQUE INDEX audit_events_v1_seq_key ON audit_events (tenant_id, seq) WHERE seq IS NOT NULL;

ALTER TABLE audit_unsealed DROP CONSTRAINT audit_unsealed_tenant_id_fkey;
