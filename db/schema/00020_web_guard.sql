-- +goose Up
SET LOCAL ROLE jejak_owner;

-- Keys the web tier signs with (the pre-sign-in CSRF token), created once
-- here so every replica reads the same key without extra configuration.
-- The tenant-facing role cannot read them; the system role only reads.
CREATE TABLE web_secrets (
    name   text  PRIMARY KEY,
    secret bytea NOT NULL CHECK (length(secret) >= 32)
);
REVOKE ALL ON web_secrets FROM jejak_app;
REVOKE ALL ON web_secrets FROM jejak_system;
GRANT SELECT ON web_secrets TO jejak_system;
-- Two random UUIDs are 244 random bits from PostgreSQL's strong source
-- (gen_random_uuid needs no extension).
INSERT INTO web_secrets (name, secret)
VALUES ('csrf', decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));

-- Sign-in attempt counters shared by every replica, one fixed window per
-- key ("acct:<email>", "acctip:<email>|<ip>", "ip:<ip>"). An attempt is
-- reserved with one upsert before the password is hashed, so parallel
-- requests cannot all pass a check that is counted only afterwards.
CREATE TABLE signin_throttle (
    key          text        PRIMARY KEY CHECK (length(key) <= 600),
    window_start timestamptz NOT NULL,
    attempts     integer     NOT NULL CHECK (attempts >= 0)
);
CREATE INDEX signin_throttle_window_idx ON signin_throttle (window_start);
REVOKE ALL ON signin_throttle FROM jejak_system;
