-- +goose Up
-- Statistics that keep up with tables that grow fast. A prepared
-- statement's generic plan is made once per session from the statistics
-- of that moment and kept until the next ANALYZE of its tables. A fresh
-- tenant's trail planned while audit_leaves held 30 rows kept a
-- sequential scan of it inside a nested loop after it held thousands:
-- under 32 sessions of reads and writes the timeline took 3.5 ms a call
-- instead of 0.5. Autovacuum analyzes such a table at most once a naptime
-- (a minute by default), and not at all where it is turned off.
--
-- app_refresh_statistics analyzes, by autovacuum's own rule (more rows
-- changed since the last ANALYZE than autovacuum_analyze_threshold +
-- autovacuum_analyze_scale_factor × rows), the tables Jejak owns, the
-- most changed first, at most max_tables of them, and returns their names.
-- A table another session holds (autovacuum, a migration) is skipped
-- rather than waited for. The maintenance leader calls it every beat; once
-- it has run, autovacuum finds nothing to analyze on those tables, so the
-- work is not done twice. Only the owner may ANALYZE, hence SECURITY
-- DEFINER, and only the system role may call it.
SET LOCAL ROLE jejak_owner;

-- +goose StatementBegin
CREATE FUNCTION app_refresh_statistics(max_tables int) RETURNS text[]
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    t record;
    done text[] := '{}';
BEGIN
    FOR t IN
        SELECT c.oid::regclass AS rel, c.relname
          FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
         WHERE s.schemaname = 'public' AND c.relowner = 'jejak_owner'::regrole
           AND s.n_mod_since_analyze > current_setting('autovacuum_analyze_threshold')::float8
               + current_setting('autovacuum_analyze_scale_factor')::float8 * greatest(c.reltuples, 0)
         ORDER BY s.n_mod_since_analyze DESC
         LIMIT max_tables
    LOOP
        EXECUTE format('ANALYZE (SKIP_LOCKED) %s', t.rel);
        done := done || t.relname::text;
    END LOOP;
    RETURN done;
END
$$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION app_refresh_statistics(int) FROM PUBLIC, jejak_app;
GRANT EXECUTE ON FUNCTION app_refresh_statistics(int) TO jejak_system;
