-- +goose Up
-- A tenant's cancelled jobs, newest first (the tenant jobs page's
-- "cancelled" tab, and staff lists filtered by tenant and that state).
-- Cancelled jobs are a few percent of a tenant's rows, so walking the
-- tenant's rows newest first (jobs_tenant_idx, then the primary key
-- (tenant_id, id)) and checking each row's state read some 1,700 heap rows
-- for a page of 50 wherever the tenant's cancelled jobs were spread (1,736
-- shared buffers at 1M jobs). Partial on cancelled: only a cancel (by
-- hand, a dead dependency, a discarded dead letter) adds an entry; the
-- claim, completion and failure only evaluate the predicate.
SET LOCAL ROLE jejak_owner;

CREATE INDEX jobs_cancelled_tenant_idx ON jobs (tenant_id, id) WHERE state = 'cancelled';
