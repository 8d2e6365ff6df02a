-- +goose Up
-- Endpoint signing secrets are stored sealed (AES-256-GCM under a key kept
-- outside the database, internal/webhook/seal.go): the column holds either
-- a readable "whsec_" secret (rows written before, sealed at the next
-- start) or a "jejak-sealed:v1:" value.
SET LOCAL ROLE jejak_owner;

ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_secret_check;
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_secret_check
    CHECK (secret LIKE 'whsec\_%' OR secret LIKE 'jejak-sealed:v1:%');
