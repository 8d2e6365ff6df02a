-- +goose Up
-- The time zone a staff member reads staff pages in (an IANA name such as
-- 'Asia/Jakarta'); NULL = UTC. Tenant pages use the tenant's zone instead.
SET LOCAL ROLE jejak_owner;

ALTER TABLE users ADD COLUMN time_zone text CHECK (time_zone <> '' AND length(time_zone) <= 64);
