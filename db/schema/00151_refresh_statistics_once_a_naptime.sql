-- +goose Up
-- app_refresh_statistics analyzed every stale table every beat (5 s). A
-- table that only churns (jobs, outbox_messages, webhook_deliveries: rows
-- inserted, updated and pruned at the same rate) is stale by autovacuum's
-- rule within seconds under load, so it was analyzed every beat: ~200 ms
-- of PostgreSQL a beat under 32 sessions of reads and writes, and every
-- ANALYZE invalidates the cached plans of the table's statements on every
-- connection. The plans that go wrong are those made while a table was a
-- fraction of its size. So a table analyzed (by anyone) less than
-- autovacuum_naptime ago is analyzed again only when it holds more than
-- twice the rows its statistics counted; otherwise it waits for the
-- naptime, as autovacuum itself would.
SET LOCAL ROLE jejak_owner;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION app_refresh_statistics(max_tables int) RETURNS text[]
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
           AND (coalesce(greatest(s.last_analyze, s.last_autoanalyze), '-infinity')
                    < now() - current_setting('autovacuum_naptime')::interval
                OR s.n_live_tup > 2 * greatest(c.reltuples, 0))
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

