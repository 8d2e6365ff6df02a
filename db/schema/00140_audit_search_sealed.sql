-- +goose Up
-- The name search's trigram index moves off audit_events onto a table the
-- sealer writes. As an expression index on audit_events it made every
-- audited write compute the search text and add it to one GIN pending
-- list shared by every writer of every tenant (its tail page taken
-- exclusively per insert, and every 256 kB merged by whichever writer
-- filled it): recording an event is to be an insert and nothing more.
-- The sealer already takes each tenant's events in batches; it now adds
-- their search text too, in the transaction that seals them. Events not
-- sealed yet (a second or so) are searched through the sealer's queue,
-- which is small, so a search misses nothing.
SET LOCAL ROLE jejak_owner;

DROP INDEX audit_events_search_idx;

CREATE TABLE audit_search (
    tenant_id bigint NOT NULL,
    event_id  bigint NOT NULL,
    text      text   NOT NULL,
    PRIMARY KEY (tenant_id, event_id)
);
-- Led by tenant_id (btree_gin) like every tenant index. Written in the
-- sealer's batches, so the default pending list would make every search
-- read up to 4 MB of unmerged entries: 256 kB keeps that small, and the
-- sealer that fills it merges it.
CREATE INDEX audit_search_text_idx ON audit_search
    USING gin (tenant_id, text gin_trgm_ops) WITH (gin_pending_list_limit = 256);

INSERT INTO audit_search (tenant_id, event_id, text)
SELECT e.tenant_id, e.id, audit_search_text(e.detail) FROM audit_events e
 WHERE NOT EXISTS (SELECT 1 FROM audit_unsealed u WHERE u.tenant_id = e.tenant_id AND u.event_id = e.id);

REVOKE ALL ON audit_search FROM jejak_app, jejak_system;
GRANT SELECT, INSERT ON audit_search TO jejak_system;
ALTER TABLE audit_search ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_search FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON audit_search TO jejak_app
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY system_access ON audit_search TO jejak_system USING (true) WITH CHECK (true);
CREATE POLICY owner_search ON audit_search FOR SELECT TO jejak_owner USING (true);
CREATE POLICY owner_search ON audit_unsealed FOR SELECT TO jejak_owner USING (true);

-- audit_search_ids as before (see migration 00120), over the sealed
-- events' search text and the unsealed events' own.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_search_ids(p_pattern text, p_before bigint, p_lim integer, p_actions text[], p_action text,
    p_entity text, p_entity_id text, p_actor_kind text, p_actor_id bigint, p_trace_id text, p_job_id bigint,
    p_from timestamptz, p_to timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 50 SET search_path = pg_catalog, public AS $$
DECLARE
    tenant bigint := public.app_tenant_id();
    f text := '';
BEGIN
    IF tenant IS NULL OR NOT public.app_is_member() THEN
        RETURN;
    END IF;
    IF p_before IS NOT NULL THEN f := f || ' AND e.id < $3'; END IF;
    IF p_actions IS NOT NULL THEN f := f || ' AND e.action = ANY($4)'; END IF;
    IF p_action IS NOT NULL THEN f := f || ' AND e.action = $5'; END IF;
    IF p_entity IS NOT NULL THEN f := f || ' AND e.entity = $6'; END IF;
    IF p_entity_id IS NOT NULL THEN f := f || ' AND e.entity_id = $7'; END IF;
    IF p_actor_kind IS NOT NULL THEN f := f || ' AND e.actor_kind = $8'; END IF;
    IF p_actor_id IS NOT NULL THEN f := f || ' AND e.actor_id = $9'; END IF;
    IF p_trace_id IS NOT NULL THEN f := f || ' AND e.trace_id = $10'; END IF;
    IF p_job_id IS NOT NULL THEN f := f || ' AND e.job_id = $11'; END IF;
    IF p_from IS NOT NULL THEN f := f || ' AND e.occurred_at >= $12'; END IF;
    IF p_to IS NOT NULL THEN f := f || ' AND e.occurred_at < $13'; END IF;
    RETURN QUERY EXECUTE
        '(SELECT e.id FROM public.audit_events e JOIN public.audit_search s ON s.tenant_id = e.tenant_id AND s.event_id = e.id'
     || ' WHERE e.tenant_id = $1 AND s.tenant_id = $1 AND s.text LIKE $2' || f || ' ORDER BY e.id DESC LIMIT $14)'
     || ' UNION ALL (SELECT e.id FROM public.audit_unsealed u JOIN public.audit_events e ON e.tenant_id = u.tenant_id AND e.id = u.event_id'
     || ' WHERE u.tenant_id = $1 AND public.audit_search_text(e.detail) LIKE $2' || f || ')'
     || ' ORDER BY 1 DESC LIMIT $14'
        USING tenant, p_pattern, p_before, p_actions, p_action, p_entity, p_entity_id, p_actor_kind,
              p_actor_id, p_trace_id, p_job_id, p_from, p_to, p_lim;
END
$$;
-- +goose StatementEnd
