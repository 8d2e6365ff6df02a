-- +goose Up
-- The outbox channel's rule: NOTIFY only when no relay loop is awake.
--
-- Any relay loop can claim any message, and a loop that is marked awake
-- claims again within its warm period (or at once, while it finds work),
-- so a message inserted while one loop is awake needs no NOTIFY: that loop
-- takes it, and if it goes to sleep first, its going-to-sleep protocol
-- (mark, take the lock exclusively, claim once more) still sees the
-- insert. Under the old rule, "NOTIFY while some loop sleeps", a replica's
-- second loop, idle because the first took every message, kept every
-- publishing transaction on the commit-time NOTIFY lock: audited work
-- (points.award: audit event and outbox message in one transaction) then
-- held its tenant's audit-chain head through that wait.
--
-- The job engine's channel keeps "some loop sleeps": a producer whose
-- workers are all busy is marked awake but cannot claim, so an awake
-- producer elsewhere does not make a sleeping replica's NOTIFY unnecessary.
-- A row pruned or left by a dead process errs towards notifying.
SET LOCAL ROLE jejak_owner;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION wake_needed(ch text) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, public AS $$
    SELECT EXISTS (SELECT 1 FROM wake_listeners WHERE channel = ch AND asleep)
       AND (ch <> 'jejak_outbox'
            OR NOT EXISTS (SELECT 1 FROM wake_listeners WHERE channel = ch AND NOT asleep))
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION wake_needed(text) FROM PUBLIC;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION wake_notify(ch text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF current_setting('transaction_isolation') = 'read committed' AND NOT wake_needed(ch) THEN
        -- Held until this transaction ends: a loop that marks itself
        -- asleep from now on waits for this transaction before its last
        -- claim. Then read again: a loop may have marked itself in between.
        PERFORM pg_advisory_xact_lock_shared(727278, hashtext(ch));
        IF NOT wake_needed(ch) THEN
            RETURN;
        END IF;
    END IF;
    PERFORM pg_notify(ch, '');
END
$$;
-- +goose StatementEnd
