-- +goose Up
-- Every settled attempt added to its endpoint's one row of the hour and
-- updated the endpoint's row, so the attempts of one endpoint committed
-- one at a time (each waiting for the previous one's WAL flush): about
-- 250 deliveries a second to an endpoint however many workers sent them.
-- The tally now goes to one of 16 rows per hour, by backend, as the job
-- and outbox rollups do (readers already sum); the endpoint row is left
-- alone by a success that finds it healthy (WebhookAttemptRecord).
SET LOCAL ROLE jejak_owner;

ALTER TABLE webhook_endpoint_hours ADD COLUMN shard smallint NOT NULL DEFAULT 0 CHECK (shard BETWEEN 0 AND 15);
ALTER TABLE webhook_endpoint_hours DROP CONSTRAINT webhook_endpoint_hours_pkey,
    ADD PRIMARY KEY (tenant_id, endpoint_id, hour, shard);

