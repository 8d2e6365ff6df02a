-- +goose Up
-- How far the maintenance leader's last fold of job_stats_minute into
-- job_stats_day reached: every minute before folded_before of the days it
-- folded is in their day rows. The owner's chart then reads the day rows
-- and only the minutes from folded_before on, instead of every minute of
-- the last two days: for a tenant whose jobs finish every minute on many
-- connections (a row per minute, kind and stats shard) that was up to
-- 2,880 × 16 × kinds rows per view of the home page (186 ms for 138k rows;
-- 0.9 ms from the mark). The fold itself, which re-read the same two days
-- of every tenant each maintenance pass, now adds only the minutes from
-- the previous mark to its own.
-- One row, always there ('-infinity' until the first fold: every minute is
-- read), so the chart's condition is a plain comparison with a scalar
-- subquery: under row-level security only a leakproof condition can be an
-- index condition, and a COALESCE around the subquery is not one (the
-- chart's statement became a sequential scan of every tenant's minutes).
-- No tenant's data in it.
SET LOCAL ROLE jejak_owner;

CREATE TABLE job_stats_folded (
    only_row      boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    folded_before timestamptz NOT NULL
);
REVOKE ALL ON job_stats_folded FROM PUBLIC, jejak_app, jejak_system;
GRANT SELECT ON job_stats_folded TO jejak_app;
GRANT SELECT, INSERT, UPDATE ON job_stats_folded TO jejak_system;
INSERT INTO job_stats_folded (folded_before) VALUES ('-infinity');
