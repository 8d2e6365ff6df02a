-- +goose Up
-- The per-minute rollups were one row per (tenant, minute, kind) for the
-- jobs and one row per minute for the outbox, added to by the statement
-- that completes a batch or marks one delivered. Every completer and relay
-- loop of every replica added to the same few rows, so each waited for the
-- previous one's commit (its WAL flush) before its own update: writers of
-- different replicas took turns, and more replicas went slower. A writer
-- now adds to one of 16 rows per key, chosen by its backend (two writers
-- meet on a row one time in 16); readers already sum (the outbox console
-- now groups by minute).
SET LOCAL ROLE jejak_owner;

-- The rollup row a writer adds to: its backend's, so the writers of one
-- moment (different connections) mostly take different rows.
-- +goose StatementBegin
CREATE FUNCTION stats_shard() RETURNS smallint
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog AS $$
    SELECT (pg_backend_pid() % 16)::smallint
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION stats_shard() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION stats_shard() TO jejak_app, jejak_system;

ALTER TABLE job_stats_minute ADD COLUMN shard smallint NOT NULL DEFAULT 0 CHECK (shard BETWEEN 0 AND 15);
ALTER TABLE job_stats_minute DROP CONSTRAINT job_stats_minute_pkey,
    ADD PRIMARY KEY (tenant_id, minute, kind, shard);

ALTER TABLE outbox_stats_minute ADD COLUMN shard smallint NOT NULL DEFAULT 0 CHECK (shard BETWEEN 0 AND 15);
ALTER TABLE outbox_stats_minute DROP CONSTRAINT outbox_stats_minute_pkey,
    ADD PRIMARY KEY (minute, shard);
