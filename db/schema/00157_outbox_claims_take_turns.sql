-- +goose Up
-- The relay's claims take turns across the cluster. Every replica runs
-- relay loops (two each by default) and each claimed at will: concurrent
-- claims walked the same oldest pending messages and listed the same
-- aggregate heads, probing every message another claim had just locked
-- before skipping it, and each took a share of what one claim would have
-- taken whole. With two replicas a claimed message cost 1.6-2.3 times the
-- buffers it cost with one, with four 2.5 times, and the relays' claims
-- were the largest cost on the database (docs/benchmarks.md, 2026-12-06
-- 12:05).
--
-- outbox_claimable now first takes a transaction-level advisory lock
-- (two-int form, classid 727279), held until the claim's statement
-- commits, and then picks the messages as before (00148's function, kept
-- as outbox_claimable_unlocked). A claim waits for the one before it (a
-- few milliseconds); the picking statements take their snapshots after
-- the wait, so they see that claim's messages as processing, not pending.
-- The lock is taken before any row, and a claim never waits for a row
-- (SKIP LOCKED), so it cannot deadlock; publishing transactions and settle
-- statements do not take it.
SET LOCAL ROLE jejak_owner;

ALTER FUNCTION outbox_claimable(int, timestamptz) RENAME TO outbox_claimable_unlocked;

-- OR REPLACE only for sqlc's schema reader, which does not follow the
-- rename: the name is free here.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_claimable(lim int, at timestamptz) RETURNS bigint[]
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(727279, 0);
    RETURN outbox_claimable_unlocked(lim, at);
END
$$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION outbox_claimable(int, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox_claimable(int, timestamptz) TO jejak_system;
