-- +goose Up
SET LOCAL ROLE jejak_owner;

-- The key that signs device cookies (a browser where an account signed in
-- successfully), separate from the CSRF key so either can be replaced
-- alone. Created once here so every replica agrees.
INSERT INTO web_secrets (name, secret)
VALUES ('device', decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));
