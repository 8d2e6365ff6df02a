-- +goose Up
-- The SQL functions that could not be inlined are rewritten, for the
-- reason 00146 gives for app_is_member: a SQL function that carries its own
-- settings (SET ...) or runs as its owner is never inlined, and PostgreSQL
-- 15 parses and plans its body on every call, where PL/pgSQL keeps its
-- statements' plans for the session. Same bodies, same answers. With 00148
-- no SQL function in the schema carries settings or runs as its owner
-- (TestNoFunctionIsPlannedPerCall).
--
-- wake_needed runs once or twice in every job and outbox insert (the
-- NOTIFY rule of wake_notify): 0.09 ms a call, nearly all of it planning
-- (pgbench, one session, 20 calls per transaction, against SELECT 1).
-- outbox_claimable (every relay claim, 0.24 ms a call on an empty outbox)
-- is rewritten by 00148. stats_shard (every completion and relay batch)
-- loses its search_path instead, naming pg_catalog itself, and is inlined
-- into the statements that call it. audit_namesakes (the name search)
-- becomes PL/pgSQL like the others.
SET LOCAL ROLE jejak_owner;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION stats_shard() RETURNS smallint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT (pg_catalog.pg_backend_pid() OPERATOR(pg_catalog.%) 16)::pg_catalog.int2
$$;
-- +goose StatementEnd
ALTER FUNCTION stats_shard() RESET ALL;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_namesakes(p_entity text, p_name text) RETURNS SETOF text
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 5 SET search_path = pg_catalog, public AS $$
BEGIN
    RETURN QUERY
    SELECT DISTINCT e.entity_id FROM public.audit_events e
     WHERE e.tenant_id = public.app_tenant_id() AND (SELECT public.app_is_member())
       AND p_name <> '' AND e.entity = p_entity AND e.detail ? 'name' AND e.detail->>'name' = p_name
     LIMIT 100;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION wake_needed(ch text) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM wake_listeners WHERE channel = ch AND asleep)
       AND (ch <> 'jejak_outbox'
            OR NOT EXISTS (SELECT 1 FROM wake_listeners WHERE channel = ch AND NOT asleep));
END
$$;
-- +goose StatementEnd
