-- +goose Up
-- Periodic work: one row per schedule and period. The
-- maintenance leader inserts the period's row with ON CONFLICT DO NOTHING
-- in the same transaction as the jobs it enqueues, so a period is
-- scheduled exactly once even when two replicas both believe they lead.
SET LOCAL ROLE jejak_owner;

CREATE TABLE schedule_runs (
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    period_key   text NOT NULL CHECK (length(period_key) BETWEEN 1 AND 40),
    period_start timestamptz NOT NULL,
    ran_at       timestamptz NOT NULL,
    worker_id    text NOT NULL,
    jobs         int NOT NULL DEFAULT 0,
    summary      text NOT NULL DEFAULT '',
    PRIMARY KEY (name, period_key)
);
CREATE INDEX schedule_runs_latest_idx ON schedule_runs (name, period_start DESC);
REVOKE ALL ON schedule_runs FROM jejak_app;
