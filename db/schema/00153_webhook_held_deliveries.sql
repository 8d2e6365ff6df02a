-- +goose Up
-- While an endpoint's breaker is open, one delivery's job waits it out (and
-- probes the endpoint when it ends); every other pending delivery of the
-- endpoint is held without a job, so a dead endpoint costs the job queue
-- one job per cool-down rather than one claim per pending delivery each
-- time the breaker half-opens. Held deliveries go back to the queue in
-- bounded batches once the breaker closes (webhook.ReleaseHeld).
SET LOCAL ROLE jejak_owner;

-- Set when the delivery was held: it stays pending but has no job.
ALTER TABLE webhook_deliveries ADD COLUMN held_at timestamptz;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_held_pending
    CHECK (held_at IS NULL OR state = 'pending');
-- The release sweep walks the endpoints with held deliveries, and each
-- endpoint's held deliveries oldest first.
CREATE INDEX webhook_deliveries_held_idx ON webhook_deliveries (tenant_id, endpoint_id, id)
    WHERE held_at IS NOT NULL;

-- The delivery whose job waits out the open breaker (NULL: none yet), and
-- that job. It stands only while that delivery is pending and not held
-- itself, and the job is still to run: a job that died or was cancelled
-- leaves its delivery pending with nothing to wait the breaker out.
ALTER TABLE webhook_endpoints ADD COLUMN breaker_holder bigint,
                              ADD COLUMN breaker_holder_job bigint;

