-- +goose Up
-- An event waits for the sealer in audit_unsealed, whole, and is moved to
-- audit_sealed (the old audit_events table, renamed) by the transaction
-- that makes it a leaf. audit_events is now a view of both, so every
-- reader sees an event from its commit on, sealed or not, as before.
--
-- Why: a writer's insert used to maintain audit_events' ten indexes (five
-- of them on every event), and 64 writers of one tenant all inserted at
-- the right-hand edge of each, contending for the same index pages. Now a
-- writer inserts one heap row and one primary-key entry; the sealer
-- inserts its batch into the indexed table alone, where nobody contends.
-- 64 writers of one tenant, each inserting a project and its event
-- (pgbench, CPU-bound): 0.55 of the ceiling with the event and its queue
-- row in the indexed table, 0.72 with one table holding a primary key.
--
-- What still holds: the event commits or rolls back with its change (the
-- writer's insert is the event); nobody may update or truncate either
-- table, or delete from audit_sealed; an event leaves audit_unsealed only
-- by a statement that puts it into audit_sealed (the trigger below checks
-- at the statement's end); forced row-level security on both, with the
-- same policies; ids come from the one sequence, so an event keeps its id
-- when it moves.
SET LOCAL ROLE jejak_owner;

ALTER TABLE audit_unsealed
    ADD COLUMN actor_kind  text,
    ADD COLUMN actor_id    bigint REFERENCES users(id),
    ADD COLUMN action      text,
    ADD COLUMN entity      text,
    ADD COLUMN entity_id   text,
    ADD COLUMN detail      jsonb,
    ADD COLUMN occurred_at timestamptz,
    ADD COLUMN trace_id    text,
    ADD COLUMN job_id      bigint;

-- The owner moves rows below under no policy of its own.
ALTER TABLE audit_unsealed NO FORCE ROW LEVEL SECURITY;
ALTER TABLE audit_events NO FORCE ROW LEVEL SECURITY;

UPDATE audit_unsealed q
   SET actor_kind = e.actor_kind, actor_id = e.actor_id, action = e.action, entity = e.entity,
       entity_id = e.entity_id, detail = e.detail, occurred_at = e.occurred_at,
       trace_id = e.trace_id, job_id = e.job_id
  FROM audit_events e
 WHERE e.tenant_id = q.tenant_id AND e.id = q.event_id;

-- A queue row whose event is gone (only a superuser could have done it)
-- cannot become an event: AuditUnsealedOrphans reported it; it goes.
DELETE FROM audit_unsealed WHERE action IS NULL;

ALTER TABLE audit_events DISABLE TRIGGER audit_events_no_delete;
DELETE FROM audit_events e USING audit_unsealed q WHERE e.tenant_id = q.tenant_id AND e.id = q.event_id;
ALTER TABLE audit_events ENABLE TRIGGER audit_events_no_delete;
ALTER TABLE audit_unsealed FORCE ROW LEVEL SECURITY;
ALTER TABLE audit_events FORCE ROW LEVEL SECURITY;

-- Ids now come from a sequence of the queue's, going on where the table's
-- identity stopped (an identity's sequence cannot change hands).
CREATE SEQUENCE audit_event_ids OWNED BY audit_unsealed.event_id;
SELECT setval('audit_event_ids', greatest((SELECT last_value FROM audit_events_id_seq),
                                          (SELECT coalesce(max(id), 0) FROM audit_events), 1));
ALTER TABLE audit_events RENAME TO audit_sealed;
ALTER TRIGGER audit_events_no_update ON audit_sealed RENAME TO audit_sealed_no_update;
ALTER TRIGGER audit_events_no_delete ON audit_sealed RENAME TO audit_sealed_no_delete;
ALTER TRIGGER audit_events_no_truncate ON audit_sealed RENAME TO audit_sealed_no_truncate;
ALTER TABLE audit_sealed ALTER COLUMN id DROP IDENTITY;
ALTER SEQUENCE audit_event_ids RENAME TO audit_events_id_seq;
ALTER TABLE audit_unsealed ALTER COLUMN event_id SET DEFAULT nextval('audit_events_id_seq');
-- Only the sealer writes sealed events.
REVOKE INSERT ON audit_sealed FROM jejak_app;

ALTER TABLE audit_unsealed
    ALTER COLUMN actor_kind SET NOT NULL,
    ALTER COLUMN action SET NOT NULL,
    ALTER COLUMN entity SET NOT NULL,
    ALTER COLUMN entity_id SET NOT NULL,
    ALTER COLUMN detail SET NOT NULL,
    ALTER COLUMN detail SET DEFAULT '{}'::jsonb,
    ALTER COLUMN occurred_at SET NOT NULL,
    ALTER COLUMN trace_id SET NOT NULL,
    ALTER COLUMN trace_id SET DEFAULT '',
    ADD CONSTRAINT audit_unsealed_action_check CHECK (action ~ '^[a-z][a-z0-9_.:-]*$' AND length(action) <= 100),
    ADD CONSTRAINT audit_unsealed_actor_kind_check CHECK (actor_kind IN ('user', 'staff', 'system')),
    ADD CONSTRAINT audit_unsealed_actor_check CHECK ((actor_kind = 'system') = (actor_id IS NULL)),
    ADD CONSTRAINT audit_unsealed_detail_check CHECK (jsonb_typeof(detail) = 'object'),
    ADD CONSTRAINT audit_unsealed_entity_check CHECK (length(entity) BETWEEN 1 AND 100),
    ADD CONSTRAINT audit_unsealed_entity_id_check CHECK (length(entity_id) <= 200),
    ADD CONSTRAINT audit_unsealed_trace_id_check CHECK (length(trace_id) <= 200);

CREATE TRIGGER audit_unsealed_no_update BEFORE UPDATE ON audit_unsealed
    FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
CREATE TRIGGER audit_unsealed_no_truncate BEFORE TRUNCATE ON audit_unsealed
    FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change();

-- +goose StatementBegin
CREATE FUNCTION audit_unsealed_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM gone g
                WHERE NOT EXISTS (SELECT 1 FROM audit_sealed s
                                   WHERE s.tenant_id = g.tenant_id AND s.id = g.event_id)) THEN
        RAISE EXCEPTION 'audit_unsealed is append-only: an event leaves it only into audit_sealed'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- After the whole statement, so the sealer's one statement that deletes
-- the batch and inserts it into audit_sealed passes.
CREATE TRIGGER audit_unsealed_moved AFTER DELETE ON audit_unsealed
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION audit_unsealed_moved();

-- Column for column the old table, so that the readers, and the types
-- sqlc gives them, stay as they were.
CREATE VIEW audit_events WITH (security_invoker = true) AS
SELECT s.tenant_id, s.seq, s.id, s.actor_kind, s.actor_id, s.action, s.entity, s.entity_id,
       s.detail, s.occurred_at, s.trace_id, s.job_id, s.prev_hash, s.hash
  FROM audit_sealed s
UNION ALL
SELECT q.tenant_id, NULL::bigint, q.event_id, q.actor_kind, q.actor_id, q.action, q.entity, q.entity_id,
       q.detail, q.occurred_at, q.trace_id, q.job_id, NULL::bytea, NULL::bytea
  FROM audit_unsealed q;

REVOKE ALL ON audit_events FROM jejak_app, jejak_system;
GRANT SELECT ON audit_events TO jejak_app, jejak_system;

-- A view of a UNION cannot be written to anyway; these make a rewrite
-- through it fail as one of the tables would, with the append-only
-- refusal (for a role allowed to try at all).
CREATE TRIGGER audit_events_no_update INSTEAD OF UPDATE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
CREATE TRIGGER audit_events_no_delete INSTEAD OF DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_refuse_change();
