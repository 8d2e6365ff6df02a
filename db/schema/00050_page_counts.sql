-- +goose Up
-- Counts the staff pages read instead of recounting the jobs table. A
-- churning jobs table is rarely all-visible, so even index-only counts over
-- its partial indexes end up visiting the heap row by row (the dead-letter
-- page and the overview refresh took 100-250 ms at 1M jobs under load).
-- These tables are written by the statements that move a job, in the same
-- statement (a CTE), so the numbers commit exactly with the state change
-- and no extra round trip is paid. The claim writes none of them.
SET LOCAL ROLE jejak_owner;

-- Dead letters per tenant, kind and failure class: the dead-letter page's
-- groups and the overview's dead/flagged figures. Small (tenants x kinds x
-- three classes at most). Written by the failure statement and lease rescue
-- (a job dies), the operator's retry and discard (it leaves dead), and the
-- dead-letter prune. Only the engine's short statements and the operator's
-- short transactions lock a row here.
CREATE TABLE job_dead_groups (
    tenant_id   bigint NOT NULL REFERENCES tenants(id),
    kind        text   NOT NULL,
    -- '' when the job died without a class.
    error_class text   NOT NULL DEFAULT '',
    n           bigint NOT NULL DEFAULT 0,
    flagged     bigint NOT NULL DEFAULT 0,
    -- When a job of the group last died and the highest id that did: the
    -- page shows that job's error as the group's example. A retry of that
    -- job leaves them as they were (the example is still a real error of
    -- the group).
    last_at     timestamptz,
    last_id     bigint,
    PRIMARY KEY (tenant_id, kind, error_class)
);

-- Jobs not finished yet (pending or running) per tenant and kind. Enqueue
-- runs inside the caller's business transaction, so an upsert on a shared
-- counter row would hold its lock until that transaction commits and queue
-- every other enqueue and every completion of the same kind behind it.
-- So changes are appended to job_count_deltas (insert only: no row is
-- ever locked by two writers) and the maintenance leader folds them into
-- job_counts; a reader sums both in one snapshot, which is exact.
-- The claim (pending -> running) changes neither: pending is unfinished
-- minus running, and running is bounded by the workers' capacity, so it
-- is counted from jobs_running_idx.
CREATE TABLE job_counts (
    tenant_id  bigint NOT NULL REFERENCES tenants(id),
    kind       text   NOT NULL,
    unfinished bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, kind)
);

-- No index and no key: appended by writers, read whole by the overview,
-- emptied by the fold.
CREATE TABLE job_count_deltas (
    tenant_id  bigint NOT NULL,
    kind       text   NOT NULL,
    unfinished bigint NOT NULL
);
-- The fold deletes every row every maintenance pass: vacuum it often so
-- the overview's scan stays over a few pages.
ALTER TABLE job_count_deltas SET (autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_scale_factor = 0);

INSERT INTO job_dead_groups (tenant_id, kind, error_class, n, flagged, last_at, last_id)
SELECT tenant_id, kind, coalesce(error_class, ''), count(*), count(*) FILTER (WHERE flagged),
       max(finished_at), max(id)
  FROM jobs WHERE state = 'dead'
 GROUP BY tenant_id, kind, coalesce(error_class, '');

INSERT INTO job_counts (tenant_id, kind, unfinished)
SELECT tenant_id, kind, count(*) FROM jobs WHERE state IN ('pending', 'running')
 GROUP BY tenant_id, kind;

-- Enqueue may run in a tenant's transaction on the app pool: it appends
-- its own tenant's deltas and nothing else. The counts themselves are the
-- engine's and staff's.
ALTER TABLE job_count_deltas ENABLE ROW LEVEL SECURITY;
ALTER TABLE job_count_deltas FORCE ROW LEVEL SECURITY;
CREATE POLICY system_access ON job_count_deltas TO jejak_system USING (true) WITH CHECK (true);
REVOKE ALL ON job_count_deltas FROM jejak_app;
GRANT INSERT ON job_count_deltas TO jejak_app;
-- The counts are tenant rows like any other: isolated the same way, though
-- only the engine and staff (jejak_system) are granted them.
ALTER TABLE job_counts ENABLE ROW LEVEL SECURITY;
ALTER TABLE job_counts FORCE ROW LEVEL SECURITY;
CREATE POLICY system_access ON job_counts TO jejak_system USING (true) WITH CHECK (true);
ALTER TABLE job_dead_groups ENABLE ROW LEVEL SECURITY;
ALTER TABLE job_dead_groups FORCE ROW LEVEL SECURITY;
CREATE POLICY system_access ON job_dead_groups TO jejak_system USING (true) WITH CHECK (true);
-- The tenant policies are the same expression as every other tenant
-- table's: scoped by app_tenant_id(), and by membership where the schema
-- checks it (app_is_member(), when an earlier migration defined it).
-- +goose StatementBegin
DO $$
DECLARE
    scope text := 'tenant_id = app_tenant_id()'
        || CASE WHEN to_regprocedure('app_is_member()') IS NULL THEN '' ELSE ' AND (SELECT app_is_member())' END;
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['job_count_deltas', 'job_counts', 'job_dead_groups'] LOOP
        EXECUTE format('CREATE POLICY tenant_isolation ON %I TO jejak_app USING (%s) WITH CHECK (%s)', t, scope, scope);
    END LOOP;
END
$$;
-- +goose StatementEnd
REVOKE ALL ON job_counts, job_dead_groups FROM jejak_app;
-- Explicit, not left to default privileges, so a later narrowing of the
-- defaults cannot take them from the engine and the staff pages.
GRANT SELECT, INSERT, UPDATE, DELETE ON job_counts, job_count_deltas, job_dead_groups TO jejak_system;

-- Oldest due job and jobs scheduled ahead, for the overview's lag and "due
-- now": one probe at the low end, and a range over the jobs scheduled in
-- the future (not over the backlog). Partial on pending: an enqueue (and
-- a retry) adds an entry; the claim adds none (its new row version is
-- running), nor does completion.
CREATE INDEX jobs_pending_at_idx ON jobs (available_at) WHERE state = 'pending';

-- A tenant's jobs newest first (the tenant jobs tabs; staff lists
-- filtered by tenant): reads only that tenant's rows instead of walking
-- the primary key backwards past every other tenant's. Running rows are
-- left out so the claim (pending -> running, never a HOT update) adds no
-- entry here; enqueue and completion add one each. A tenant's running
-- jobs are few (bounded by the workers) and come from jobs_running_idx.
CREATE INDEX jobs_tenant_idx ON jobs (tenant_id, id) WHERE state <> 'running';

-- Dead letters by kind (a filter that rarely matches would otherwise walk
-- every dead letter): only a dying job pays for it.
CREATE INDEX jobs_dead_kind_idx ON jobs (kind, id) WHERE state = 'dead';
