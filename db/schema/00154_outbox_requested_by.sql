-- +goose Up
-- The user whose action an outbox message reports (NULL: the system's
-- own, e.g. an endpoint disabled for failing). The relay passes it on as a
-- header, so the webhook deliveries the event causes are attributed to
-- that user like any job done on their behalf, rather than counted as
-- jobs nobody asked for. No foreign key: it is a record of who acted, like
-- the trace id, and a check of the users row would lock it for every
-- message.
SET LOCAL ROLE jejak_owner;

ALTER TABLE outbox_messages ADD COLUMN requested_by bigint;
-- The same on each webhook delivery of the event: every attempt's job,
-- also one released after the delivery was held behind an open breaker
-- (its job gone), is requested on that user's behalf.
ALTER TABLE webhook_deliveries ADD COLUMN requested_by bigint;
-- And the event's trace, for the same reason: a released delivery's
-- attempts stay in the trace of the request that caused the event.
ALTER TABLE webhook_deliveries ADD COLUMN trace_id text NOT NULL DEFAULT '' CHECK (length(trace_id) <= 200);
