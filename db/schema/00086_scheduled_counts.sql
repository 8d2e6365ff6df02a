-- +goose Up
-- Jobs scheduled ahead (pending, due later) per tenant and kind, for the
-- overview's "due now" (pending minus scheduled). Counting them on every
-- refresh read each one's heap row through jobs_pending_at_idx: 8,300
-- shared buffers and 70-400 ms at 1M jobs (10,000 scheduled), growing with
-- the jobs scheduled ahead. A job leaves "scheduled" when the clock passes
-- its due time, not through a statement, so no write can keep this count:
-- the maintenance leader recounts it on each pass (JobCountsScheduledRefresh,
-- the same range scan, once per pass instead of once per refresh), and the
-- overview reads the last count and says when it was taken.
SET LOCAL ROLE jejak_owner;

ALTER TABLE job_counts ADD COLUMN scheduled bigint NOT NULL DEFAULT 0;

-- When the leader last counted (one row). Not tenant data: a time only.
CREATE TABLE job_counts_scheduled_at (
    only_row   boolean     PRIMARY KEY DEFAULT true CHECK (only_row),
    counted_at timestamptz NOT NULL
);
REVOKE ALL ON job_counts_scheduled_at FROM jejak_app;
REVOKE ALL ON job_counts_scheduled_at FROM jejak_system;
GRANT SELECT, INSERT, UPDATE ON job_counts_scheduled_at TO jejak_system;

-- No count here: job_counts is under forced row-level security with no
-- policy for the owner, and the leader counts on its first pass (bulk
-- loads call job.RebuildCounts, which counts too). Until then the
-- overview says the jobs scheduled ahead are not counted yet.
