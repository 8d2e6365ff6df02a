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

-- What a name search reads: every string value of the event's detail
-- (names, e-mails, reasons, plan names), lower-cased. Keys are left out so
-- "name" does not match every event, and so is the entity id (the entity
-- filter finds ids): digits in every event would make the trigram posting
-- lists of a name with a number in it long. A plain SQL function (no SET
-- clause) so the planner inlines it and matches the index.
-- +goose StatementBegin
CREATE FUNCTION audit_search_text(detail jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT pg_catalog.lower(
        pg_catalog.jsonb_path_query_array(detail, 'strict $.** ? (@.type() == "string")')::text)
$$;
-- +goose StatementEnd

-- Led by tenant_id (btree_gin) like every tenant index. New entries wait
-- in the index's pending list until it is merged, and every search reads
-- the whole list: at the default 4 MB limit, 490 pages per search (20 ms)
-- where the merged index needed 109 (1 ms), measured at 300k events. A
-- 256 kB limit keeps that read to 32 pages, and the insert that fills the
-- list merges it (a small merge, often) rather than waiting for vacuum.
CREATE INDEX audit_events_search_idx ON audit_events
    USING gin (tenant_id, audit_search_text(detail) gin_trgm_ops) WITH (gin_pending_list_limit = 256);

-- Under forced row-level security the planner may not use an index for a
-- condition whose operator is not leakproof before the policy's own
-- condition has passed, and LIKE is not leakproof: a jejak_app search
-- would read every event of the tenant to filter it. audit_search_ids runs
-- the search as the table's owner (which reads events only through it, as
-- it reads memberships only through app_is_member), for the tenant and
-- member the transaction is scoped to (the same two checks the jejak_app
-- policy makes; outside a tenant scope it finds nothing), and returns
-- event ids only: the timeline then reads those events under row-level
-- security. The query is built from the filters present and planned with
-- their values, so a rare name is found through the trigram index and a
-- common one by walking the newest events.
CREATE POLICY owner_search ON audit_events FOR SELECT TO jejak_owner USING (true);

-- +goose StatementBegin
CREATE FUNCTION audit_search_ids(p_pattern text, p_before bigint, p_lim integer, p_actions text[], p_action text,
    p_entity text, p_entity_id text, p_actor_kind text, p_actor_id bigint, p_trace_id text, p_job_id bigint,
    p_from timestamptz, p_to timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 50 SET search_path = pg_catalog, public AS $$
DECLARE
    tenant bigint := public.app_tenant_id();
    q text := 'SELECT e.id FROM public.audit_events e WHERE e.tenant_id = $1'
           || ' AND public.audit_search_text(e.detail) LIKE $2';
BEGIN
    IF tenant IS NULL OR NOT public.app_is_member() THEN
        RETURN;
    END IF;
    IF p_before IS NOT NULL THEN q := q || ' AND e.id < $3'; END IF;
    IF p_actions IS NOT NULL THEN q := q || ' AND e.action = ANY($4)'; END IF;
    IF p_action IS NOT NULL THEN q := q || ' AND e.action = $5'; END IF;
    IF p_entity IS NOT NULL THEN q := q || ' AND e.entity = $6'; END IF;
    IF p_entity_id IS NOT NULL THEN q := q || ' AND e.entity_id = $7'; END IF;
    IF p_actor_kind IS NOT NULL THEN q := q || ' AND e.actor_kind = $8'; END IF;
    IF p_actor_id IS NOT NULL THEN q := q || ' AND e.actor_id = $9'; END IF;
    IF p_trace_id IS NOT NULL THEN q := q || ' AND e.trace_id = $10'; END IF;
    IF p_job_id IS NOT NULL THEN q := q || ' AND e.job_id = $11'; END IF;
    IF p_from IS NOT NULL THEN q := q || ' AND e.occurred_at >= $12'; END IF;
    IF p_to IS NOT NULL THEN q := q || ' AND e.occurred_at < $13'; END IF;
    RETURN QUERY EXECUTE q || ' ORDER BY e.id DESC LIMIT $14'
        USING tenant, p_pattern, p_before, p_actions, p_action, p_entity, p_entity_id, p_actor_kind,
              p_actor_id, p_trace_id, p_job_id, p_from, p_to, p_lim;
END
$$;
-- +goose StatementEnd

-- An entity's history by its name: a project deleted and created again
-- under the same name has two ids and one story.
CREATE INDEX audit_events_entity_name_idx ON audit_events (tenant_id, entity, (detail->>'name'), id)
    WHERE detail ? 'name';

-- The ids an entity's namesakes (same type, same name) carry in the
-- current tenant's trail, at most 100. Run as the owner for the reason
-- audit_search_ids is (->> is not leakproof either), with the same checks.
-- +goose StatementBegin
CREATE FUNCTION audit_namesakes(p_entity text, p_name text) RETURNS SETOF text
LANGUAGE sql STABLE SECURITY DEFINER ROWS 5 SET search_path = pg_catalog, public AS $$
    SELECT DISTINCT e.entity_id FROM public.audit_events e
     WHERE e.tenant_id = public.app_tenant_id() AND (SELECT public.app_is_member())
       AND p_name <> '' AND e.entity = p_entity AND e.detail ? 'name' AND e.detail->>'name' = p_name
     LIMIT 100
$$;
-- +goose StatementEnd
