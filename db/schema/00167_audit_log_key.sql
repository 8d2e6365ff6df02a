-- +goose Up
-- The key that signs every tenant's log, claimed by the first sealer that
-- starts (its verifier key, public anyway). A sealer compares its own with
-- it at start and refuses to run on another: replicas started at once
-- with different anchor keys on a database with no checkpoint yet would
-- otherwise each sign logs under their own key. On a database signed
-- before this table, the newest checkpoint decides first (the app checks
-- it before claiming). Changing the key means deleting the row, as the
-- owner, once every checkpoint is accounted for (docs/audit.md).
SET LOCAL ROLE jejak_owner;

CREATE TABLE audit_log_key (
    one          boolean PRIMARY KEY DEFAULT true CHECK (one),
    verifier_key text NOT NULL CHECK (verifier_key <> ''),
    claimed_at   timestamptz NOT NULL DEFAULT now()
);

REVOKE ALL ON audit_log_key FROM jejak_app, jejak_system;
GRANT SELECT, INSERT ON audit_log_key TO jejak_system;
