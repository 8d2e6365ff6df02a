-- +goose Up
-- The audit trail: an append-only, per-tenant hash chain.
-- See docs/audit.md for the design and its limits.
SET LOCAL ROLE jejak_owner;

-- One head per tenant: the last sequence number and hash of its chain.
-- Writers lock this row (SELECT ... FOR UPDATE) to get a gap-free total order
-- within a tenant; different tenants lock different rows and never wait on
-- each other. The head only moves through audit_events inserts (trigger
-- below), so it is also the database's own record of "how long the chain is",
-- which lets verification notice a deleted tail.
CREATE TABLE audit_heads (
    tenant_id bigint PRIMARY KEY REFERENCES tenants(id),
    seq       bigint NOT NULL CHECK (seq >= 0),
    hash      bytea  NOT NULL CHECK (length(hash) = 32)
);

CREATE TABLE audit_events (
    tenant_id   bigint NOT NULL REFERENCES tenants(id),
    -- Per-tenant, gap-free, starts at 1: the chain's order.
    seq         bigint NOT NULL CHECK (seq > 0),
    -- A global insertion number for humans and cross-tenant keyset paging
    -- (staff search); the key is (tenant_id, seq).
    id          bigint NOT NULL GENERATED ALWAYS AS IDENTITY,
    actor_kind  text   NOT NULL CHECK (actor_kind IN ('user', 'staff', 'system')),
    -- NULL exactly for system actors (workers, schedules): nobody did it.
    actor_id    bigint REFERENCES users(id),
    action      text   NOT NULL CHECK (action ~ '^[a-z][a-z0-9_.:-]*$' AND length(action) <= 100),
    entity      text   NOT NULL CHECK (length(entity) BETWEEN 1 AND 100),
    entity_id   text   NOT NULL CHECK (length(entity_id) <= 200),
    detail      jsonb  NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(detail) = 'object'),
    occurred_at timestamptz NOT NULL,
    trace_id    text   NOT NULL DEFAULT '' CHECK (length(trace_id) <= 200),
    -- No foreign key: finished jobs are pruned (J13), their audit stays.
    job_id      bigint,
    prev_hash   bytea  NOT NULL CHECK (length(prev_hash) = 32),
    hash        bytea  NOT NULL CHECK (length(hash) = 32),
    PRIMARY KEY (tenant_id, seq),
    CHECK ((actor_kind = 'system') = (actor_id IS NULL))
);

-- Read paths (the primary key serves the timeline, newest first).
CREATE INDEX audit_events_entity_idx ON audit_events (tenant_id, entity, entity_id, seq);
CREATE INDEX audit_events_action_idx ON audit_events (tenant_id, action, seq);
CREATE INDEX audit_events_actor_idx  ON audit_events (tenant_id, actor_id, seq) WHERE actor_id IS NOT NULL;
-- trace ids and job ids are globally unique, so these two are global: the
-- same index answers a tenant's search (plus a tenant_id filter on a handful
-- of rows) and staff's cross-tenant forensics.
CREATE INDEX audit_events_trace_idx  ON audit_events (trace_id) WHERE trace_id <> '';
CREATE INDEX audit_events_job_idx    ON audit_events (job_id) WHERE job_id IS NOT NULL;

-- Append-only: nobody (not even the owner) may rewrite or remove history.
-- +goose StatementBegin
CREATE FUNCTION audit_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change();

-- Every insert must extend its tenant's chain: per tenant, the new rows are
-- consecutive from head.seq + 1, each links to the previous hash, and the
-- first links to the head. Then the head moves to the last new row. A writer
-- that skipped the head lock (or a buggy one) fails here instead of forking
-- the chain. Statement level with a transition table, so a bulk insert of
-- thousands of rows costs one head update per tenant, not one per row.
-- The SHA-256 itself is computed by the writer; verification recomputes it.
-- +goose StatementBegin
CREATE FUNCTION audit_extend_heads() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    broken bigint;
BEGIN
    FOR r IN
        SELECT n.tenant_id, min(n.seq) AS first_seq, max(n.seq) AS last_seq, count(*) AS n
        FROM new_rows n GROUP BY n.tenant_id ORDER BY n.tenant_id
    LOOP
        IF r.n <> r.last_seq - r.first_seq + 1 THEN
            RAISE EXCEPTION 'audit chain of tenant %: inserted sequence numbers % to % are not consecutive',
                r.tenant_id, r.first_seq, r.last_seq USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        SELECT b.seq INTO broken
        FROM new_rows a JOIN new_rows b ON b.tenant_id = a.tenant_id AND b.seq = a.seq + 1
        WHERE a.tenant_id = r.tenant_id AND b.prev_hash <> a.hash
        ORDER BY b.seq LIMIT 1;
        IF broken IS NOT NULL THEN
            RAISE EXCEPTION 'audit chain of tenant %: event % does not link to event %',
                r.tenant_id, broken, broken - 1 USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        UPDATE audit_heads h
           SET seq = r.last_seq,
               hash = (SELECT l.hash FROM new_rows l WHERE l.tenant_id = r.tenant_id AND l.seq = r.last_seq)
         WHERE h.tenant_id = r.tenant_id
           AND h.seq = r.first_seq - 1
           AND h.hash = (SELECT f.prev_hash FROM new_rows f WHERE f.tenant_id = r.tenant_id AND f.seq = r.first_seq);
        IF NOT FOUND THEN
            RAISE EXCEPTION 'audit chain of tenant %: event % does not extend the head (lock the head row first)',
                r.tenant_id, r.first_seq USING ERRCODE = 'integrity_constraint_violation';
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_events_extend_heads AFTER INSERT ON audit_events
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION audit_extend_heads();

-- The head can be created only empty (seq 0, the zero genesis hash), can
-- only move forward, and only onto an event that exists with that hash: in
-- practice only the trigger above moves it. It is never deleted.
-- +goose StatementBegin
CREATE FUNCTION audit_guard_head() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.seq <> 0 OR NEW.hash <> '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea THEN
            RAISE EXCEPTION 'audit head of tenant % must start empty', NEW.tenant_id
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN NEW;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'audit_heads rows cannot be deleted' USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.tenant_id <> OLD.tenant_id OR NEW.seq <= OLD.seq
       OR NOT EXISTS (SELECT 1 FROM audit_events e
                      WHERE e.tenant_id = NEW.tenant_id AND e.seq = NEW.seq AND e.hash = NEW.hash) THEN
        RAISE EXCEPTION 'audit head of tenant % can only advance onto a recorded event', OLD.tenant_id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_heads_guard BEFORE INSERT OR UPDATE OR DELETE ON audit_heads
    FOR EACH ROW EXECUTE FUNCTION audit_guard_head();
CREATE TRIGGER audit_heads_no_truncate BEFORE TRUNCATE ON audit_heads
    FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change();

-- Privileges: the default grants (SELECT, INSERT, UPDATE, DELETE) are
-- narrowed. Events: read and append only. Heads: read, create, and update
-- of seq/hash only (UPDATE is also what SELECT ... FOR UPDATE requires).
REVOKE ALL ON audit_events FROM jejak_app, jejak_system;
GRANT SELECT, INSERT ON audit_events TO jejak_app, jejak_system;
REVOKE ALL ON audit_heads FROM jejak_app, jejak_system;
GRANT SELECT, INSERT ON audit_heads TO jejak_app, jejak_system;
GRANT UPDATE (seq, hash) ON audit_heads TO jejak_app, jejak_system;

-- Tenant isolation, as for every tenant table (00003_tenancy_rls.sql).
ALTER TABLE audit_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_events FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON audit_events TO jejak_app
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY system_access ON audit_events TO jejak_system USING (true) WITH CHECK (true);

ALTER TABLE audit_heads ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_heads FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON audit_heads TO jejak_app
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY system_access ON audit_heads TO jejak_system USING (true) WITH CHECK (true);
