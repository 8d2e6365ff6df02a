-- +goose Up
-- NOTIFY only when a listener sleeps.
--
-- A transaction that has called pg_notify takes one lock for the whole
-- cluster at commit (PreCommit_Notify: AccessExclusiveLock on "database 0",
-- seen as `Lock: object` at `commit`) and holds it through its commit's
-- WAL flush, so notifying commits run one at a time, fsync included, with
-- no group commit. The jobs and outbox insert triggers notified on every
-- insert: under load every enqueuing or publishing transaction queued on
-- that lock. Now a claim loop (the job engine's producer, each outbox relay
-- loop) writes here when it goes to sleep and when it wakes, and the
-- triggers notify only while some loop on the channel sleeps. See
-- docs/jobs.md "Waking idle workers".
--
-- The race between an insert that saw every loop awake and a loop going to
-- sleep is closed by an advisory lock (classid 727278, objid hashtext of
-- the channel): an insert that finds nobody asleep holds it shared until
-- its transaction ends, and a loop that has just marked itself asleep takes
-- it exclusively (and lets go at once) before its last claim, so that claim
-- sees every such insert. An insert that takes the lock after the mark sees
-- the mark and notifies. Only inserts caught between their two reads of
-- this table while a loop waits for the lock queue behind it, for at most
-- the loop's lock_timeout.
SET LOCAL ROLE jejak_owner;

-- One row per claim loop that has used the channel. Unlogged: it is only a
-- hint about live processes, so it needs no WAL (marking a loop asleep
-- commits without a flush) and a crash may empty it (every loop comes back
-- awake: the reconnecting LISTEN wakes it, and it marks itself again before
-- it sleeps). A loop that dies while asleep leaves a row that only costs
-- NOTIFYs until it expires: a sleeping loop refreshes its row every poll,
-- and the maintenance leader deletes rows past expires_at.
CREATE UNLOGGED TABLE wake_listeners (
    channel    text NOT NULL CHECK (channel IN ('jejak_jobs', 'jejak_outbox')),
    listener   text NOT NULL CHECK (length(listener) BETWEEN 1 AND 200),
    asleep     boolean NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (channel, listener)
);
-- Only the engine and the relay (jejak_system) mark themselves; tenant
-- transactions read the table through wake_notify alone.
REVOKE ALL ON wake_listeners FROM PUBLIC, jejak_app, jejak_system;
GRANT SELECT, INSERT, UPDATE, DELETE ON wake_listeners TO jejak_system;

-- Called once per inserting statement by the triggers below, as the
-- inserting role (jejak_app for tenant transactions): SECURITY DEFINER so
-- that role needs no privilege on wake_listeners. Outside READ COMMITTED
-- the second read would see the transaction's old snapshot, so such
-- transactions always notify.
-- +goose StatementBegin
CREATE FUNCTION wake_notify(ch text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF current_setting('transaction_isolation') = 'read committed'
       AND NOT EXISTS (SELECT 1 FROM wake_listeners WHERE channel = ch AND asleep) THEN
        -- Held until this transaction ends: a loop that marks itself
        -- asleep from now on waits for this transaction before its last
        -- claim. Then read again: a loop may have marked itself in between.
        PERFORM pg_advisory_xact_lock_shared(727278, hashtext(ch));
        IF NOT EXISTS (SELECT 1 FROM wake_listeners WHERE channel = ch AND asleep) THEN
            RETURN;
        END IF;
    END IF;
    PERFORM pg_notify(ch, '');
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION wake_notify(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION wake_notify(text) TO jejak_app, jejak_system;

-- The insert triggers (00004, 00030) keep their names and statement level;
-- only their bodies change.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION jobs_notify_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM wake_notify('jejak_jobs');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_notify_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM wake_notify('jejak_outbox');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
