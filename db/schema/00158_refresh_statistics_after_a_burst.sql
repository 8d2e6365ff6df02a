-- +goose Up
-- The job table is also analyzed when it holds far more unfinished jobs
-- than its statistics believe, however recently it was analyzed and
-- however large it is. Statistics taken while a queue was quiet (nothing
-- pending) make the planner believe almost no job is pending; after a
-- burst the fair claim then read every due job through
-- jobs_pending_at_idx and sorted them, once per tenant its walk visits,
-- instead of probing jobs_claim_idx (870 buffers a probe at 4,400 due
-- jobs, growing with the backlog). The rule of 00151 does not see that:
-- a burst of 50,000 into a table of a million finished jobs is well under
-- its 10 % of changes, and within a naptime of the last ANALYZE a table
-- must double first.
--
-- What the statistics believe is the partial indexes' row counts, which
-- ANALYZE sets from the same sample the planner's estimates come from:
-- jobs_claim_idx holds the pending jobs, jobs_running_idx the running
-- ones. What is true the caller passes in: the unfinished jobs (pending
-- and running) from job_counts and its deltas, exact and cheap to read,
-- and under row-level security with no policy for this function's owner.
-- Four times the belief plus 1,000 keeps steady churn from analyzing the
-- table again and again: once analyzed, the belief is the truth again.
-- And at least as many rows must have changed since as the belief is
-- short of: counters that drifted from the table (they are rebuilt by
-- job.RebuildCounts) cannot have it analyzed every pass.
SET LOCAL ROLE jejak_owner;

DROP FUNCTION app_refresh_statistics(int);

-- +goose StatementBegin
CREATE FUNCTION app_refresh_statistics(max_tables int, jobs_unfinished bigint) RETURNS text[]
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    t record;
    done text[] := '{}';
    believed float8 := (SELECT sum(greatest(reltuples, 0)) FROM pg_class
                         WHERE oid IN ('public.jobs_claim_idx'::regclass, 'public.jobs_running_idx'::regclass));
BEGIN
    FOR t IN
        SELECT c.oid::regclass AS rel, c.relname
          FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
         WHERE s.schemaname = 'public' AND c.relowner = 'jejak_owner'::regrole
           AND ((s.n_mod_since_analyze > current_setting('autovacuum_analyze_threshold')::float8
                    + current_setting('autovacuum_analyze_scale_factor')::float8 * greatest(c.reltuples, 0)
                 AND (coalesce(greatest(s.last_analyze, s.last_autoanalyze), '-infinity')
                          < now() - current_setting('autovacuum_naptime')::interval
                      OR s.n_live_tup > 2 * greatest(c.reltuples, 0)))
                OR (c.oid = 'public.jobs'::regclass AND jobs_unfinished > 4 * believed + 1000
                    AND s.n_mod_since_analyze >= jobs_unfinished - believed))
         ORDER BY c.oid = 'public.jobs'::regclass AND jobs_unfinished > 4 * believed + 1000 DESC,
                  s.n_mod_since_analyze DESC
         LIMIT max_tables
    LOOP
        EXECUTE format('ANALYZE (SKIP_LOCKED) %s', t.rel);
        done := done || t.relname::text;
    END LOOP;
    RETURN done;
END
$$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION app_refresh_statistics(int, bigint) FROM PUBLIC, jejak_app;
GRANT EXECUTE ON FUNCTION app_refresh_statistics(int, bigint) TO jejak_system;
