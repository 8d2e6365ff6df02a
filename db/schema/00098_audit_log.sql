-- +goose Up
-- The audit trail becomes a transparency log (docs/audit.md). A writer only
-- inserts its event: no head row, no lock or counter shared with the
-- tenant's other writers. A sealer (internal/audit, Sealer) then takes the
-- committed, unsealed events of a tenant in batches under one lock on the
-- tenant's tree row, gives them the tenant's gap-free seq, and appends them
-- as leaves of the tenant's RFC 6962 Merkle tree; signed checkpoints commit
-- to the tree.
--
-- Events recorded before this migration (the v1 hash chain) keep their seq,
-- prev_hash and hash; the sealer integrates them first, in seq order, as
-- the first leaves of each tree. New events leave the three columns NULL.
SET LOCAL ROLE jejak_owner;

-- The chain's bookkeeping goes: no per-insert head update, no per-insert
-- day count (the sealer counts days as it seals).
DROP TRIGGER audit_events_extend_heads ON audit_events;
DROP TRIGGER audit_events_count_days ON audit_events;
DROP FUNCTION audit_extend_heads();
DROP FUNCTION audit_count_days();

-- The v1 heads stay as the record of how long each v1 chain was (the
-- sealer integrates a tenant's v1 events up to its head); nobody moves
-- them any more.
REVOKE INSERT, UPDATE ON audit_heads FROM jejak_app, jejak_system;
-- Day counts are the sealer's (jejak_system) now; writers only insert
-- their event.
REVOKE INSERT, UPDATE ON audit_day_counts FROM jejak_app;

-- seq now belongs to the leaf; an event's key is its id.
ALTER TABLE audit_events ADD CONSTRAINT audit_events_v1_seq_key UNIQUE (tenant_id, seq);
ALTER TABLE audit_events DROP CONSTRAINT audit_events_pkey;
ALTER TABLE audit_events ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE audit_events ALTER COLUMN seq DROP NOT NULL,
                         ALTER COLUMN prev_hash DROP NOT NULL,
                         ALTER COLUMN hash DROP NOT NULL;
-- Not valid: the v1 rows keep their chain; every new row must leave it out.
ALTER TABLE audit_events ADD CONSTRAINT audit_events_v2_unchained
    CHECK (seq IS NULL AND prev_hash IS NULL AND hash IS NULL) NOT VALID;

-- The read paths page on id now (newest first, keyset on id).
DROP INDEX audit_events_entity_idx, audit_events_action_idx, audit_events_actor_idx,
           audit_events_actor_kind_idx, audit_events_time_idx;
CREATE INDEX audit_events_entity_idx     ON audit_events (tenant_id, entity, entity_id, id);
CREATE INDEX audit_events_action_idx     ON audit_events (tenant_id, action, id);
CREATE INDEX audit_events_actor_idx      ON audit_events (tenant_id, actor_id, id) WHERE actor_id IS NOT NULL;
CREATE INDEX audit_events_actor_kind_idx ON audit_events (tenant_id, actor_kind, id);
CREATE INDEX audit_events_time_idx       ON audit_events (tenant_id, occurred_at, id);

-- Committed events waiting for the sealer. A statement-level trigger adds
-- every inserted event (one insert per statement, whoever inserts), so the
-- queue commits or rolls back with the events and the sealer sees exactly
-- the committed ones, whatever order their transactions commit in.
CREATE TABLE audit_unsealed (
    tenant_id bigint NOT NULL REFERENCES tenants(id),
    event_id  bigint NOT NULL,
    queued_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, event_id)
);

-- +goose StatementBegin
CREATE FUNCTION audit_queue_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO audit_unsealed (tenant_id, event_id) SELECT n.tenant_id, n.id FROM new_rows n;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_events_queue AFTER INSERT ON audit_events
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION audit_queue_events();

-- One row per leaf: the tenant's seq (gap-free from 1, leaf index seq - 1),
-- the event it seals, and the tree hashes that appending it stored, as in
-- golang.org/x/mod/sumdb/tlog's StoredHashes: the leaf hash first, then one
-- hash per subtree the leaf completes, 32 bytes each. Any inclusion or
-- consistency proof reads a handful of these rows by primary key.
CREATE TABLE audit_leaves (
    tenant_id bigint NOT NULL REFERENCES tenants(id),
    seq       bigint NOT NULL CHECK (seq > 0),
    event_id  bigint NOT NULL,
    hashes    bytea  NOT NULL CHECK (length(hashes) > 0 AND length(hashes) % 32 = 0),
    sealed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, seq),
    UNIQUE (tenant_id, event_id)
);

-- Each tenant's tree: its size (the last seq) and RFC 6962 root, and the
-- size its last checkpoint signed. The sealer locks this row for a batch:
-- one lock per batch, and two sealers can never extend the same tree.
CREATE TABLE audit_trees (
    tenant_id   bigint PRIMARY KEY REFERENCES tenants(id),
    size        bigint NOT NULL DEFAULT 0 CHECK (size >= 0),
    root        bytea  NOT NULL CHECK (length(root) = 32),
    signed_size bigint NOT NULL DEFAULT 0 CHECK (signed_size >= 0 AND signed_size <= size),
    signed_at   timestamptz NOT NULL DEFAULT 'epoch',
    updated_at  timestamptz NOT NULL DEFAULT now()
);
-- Trees that grew since their last checkpoint.
CREATE INDEX audit_trees_unsigned_idx ON audit_trees (tenant_id) WHERE size > signed_size;

-- Signed checkpoints (C2SP tlog-checkpoint signed notes), one per signed
-- tree size.
CREATE TABLE audit_checkpoints (
    tenant_id  bigint NOT NULL REFERENCES tenants(id),
    size       bigint NOT NULL CHECK (size > 0),
    root       bytea  NOT NULL CHECK (length(root) = 32),
    note       text   NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, size)
);

-- A tree only grows.
-- +goose StatementBegin
CREATE FUNCTION audit_guard_tree() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'audit_trees rows cannot be deleted' USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.tenant_id <> OLD.tenant_id OR NEW.size < OLD.size OR NEW.signed_size < OLD.signed_size
       OR (NEW.size = OLD.size AND NEW.root <> OLD.root) THEN
        RAISE EXCEPTION 'audit tree of tenant % can only grow', OLD.tenant_id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_trees_guard BEFORE UPDATE OR DELETE ON audit_trees
    FOR EACH ROW EXECUTE FUNCTION audit_guard_tree();
CREATE TRIGGER audit_trees_no_truncate BEFORE TRUNCATE ON audit_trees
    FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change();

CREATE TRIGGER audit_leaves_no_update BEFORE UPDATE OR DELETE ON audit_leaves
    FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
CREATE TRIGGER audit_leaves_no_truncate BEFORE TRUNCATE ON audit_leaves
    FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change();
CREATE TRIGGER audit_checkpoints_no_update BEFORE UPDATE OR DELETE ON audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
CREATE TRIGGER audit_checkpoints_no_truncate BEFORE TRUNCATE ON audit_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change();

-- Privileges: a tenant-scoped writer can only queue its events (through
-- the trigger) and read its log; the sealer (jejak_system) seals.
REVOKE ALL ON audit_unsealed, audit_leaves, audit_trees, audit_checkpoints FROM jejak_app, jejak_system;
GRANT SELECT, INSERT ON audit_unsealed TO jejak_app;
GRANT SELECT ON audit_leaves, audit_trees, audit_checkpoints TO jejak_app;
GRANT SELECT, INSERT, DELETE ON audit_unsealed TO jejak_system;
GRANT SELECT, INSERT ON audit_leaves, audit_checkpoints TO jejak_system;
GRANT SELECT, INSERT, UPDATE ON audit_trees TO jejak_system;

-- Tenant isolation, as for every tenant table.
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['audit_unsealed', 'audit_leaves', 'audit_trees', 'audit_checkpoints'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_isolation ON %I TO jejak_app USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id())', t);
        EXECUTE format('CREATE POLICY system_access ON %I TO jejak_system USING (true) WITH CHECK (true)', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
