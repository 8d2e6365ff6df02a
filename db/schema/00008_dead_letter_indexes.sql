-- +goose Up
-- Dead letters are read three ways: a tenant's own (tenant pages), all of
-- them newest first (staff list, bulk actions), and grouped by kind and
-- failure class (staff triage). With tens of thousands of dead letters
-- scattered over a large table, reading their heap rows dominated those
-- pages (about 100 ms at 30k dead in 1M jobs). A partial index only gets
-- entries for rows that satisfy its predicate, so these cost nothing on the
-- claim/complete path: only a job that dies pays for them.
SET LOCAL ROLE jejak_owner;

DROP INDEX jobs_dead_idx;

-- Tenant pages and tenant-filtered staff views (lead with tenant_id).
CREATE INDEX jobs_dead_tenant_idx ON jobs (tenant_id, id) WHERE state = 'dead';

-- Staff views: newest first by a backward scan, and grouping/counting as
-- an index-only scan over the covered columns.
CREATE INDEX jobs_dead_all_idx ON jobs (id) INCLUDE (tenant_id, kind, error_class, flagged, finished_at)
    WHERE state = 'dead';
