-- +goose Up
-- Finding events by the names in them ("Katalog" finds "deleted project
-- Katalog Musim Hujan") and an entity's history by its name. Both are
-- indexes over what an event already stores: no column of audit_events
-- changes, so nothing an entry hashes (internal/audit/hash.go) changes,
-- and the table stays insert-only.
-- Trigram and btree operator classes for GIN; both extensions are
-- trusted, created here by the migrating role before it becomes the owner.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS btree_gin;

SET LOCAL ROLE jejak_owner;

-- What a name search reads: the event's entity id and every string value
-- of its detail (names, e-mails, reasons, plan names), lower-cased. Keys
-- are left out so "name" does not match every event. A plain SQL function
-- (no SET clause) so the planner inlines it and matches the index.
-- +goose StatementBegin
CREATE FUNCTION audit_search_text(detail jsonb, entity_id text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT pg_catalog.lower(entity_id || ' ' ||
        pg_catalog.jsonb_path_query_array(detail, 'strict $.** ? (@.type() == "string")')::text)
$$;
-- +goose StatementEnd

-- Led by tenant_id (btree_gin) like every tenant index, so one tenant's
-- search does not read another's matches.
CREATE INDEX audit_events_search_idx ON audit_events
    USING gin (tenant_id, audit_search_text(detail, entity_id) gin_trgm_ops);

-- An entity's history by its name: a project deleted and created again
-- under the same name has two ids and one story.
CREATE INDEX audit_events_entity_name_idx ON audit_events (tenant_id, entity, (detail->>'name'), id)
    WHERE detail ? 'name';
