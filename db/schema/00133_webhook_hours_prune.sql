-- +goose Up
-- The hourly attempt tallies are read for the last 24 hours only; the
-- maintenance leader deletes older ones by hour, across tenants.
SET LOCAL ROLE jejak_owner;

CREATE INDEX webhook_endpoint_hours_hour_idx ON webhook_endpoint_hours (hour);
