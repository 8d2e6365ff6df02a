-- +goose Up
-- Controls against three failure modes of sensitive work:
-- payload drift (payload_version per job), out-of-order processing
-- (depends_on: run only after another job succeeded) and retry storms
-- (pause a kind or a queue, by hand or automatically).
SET LOCAL ROLE jejak_owner;

-- Both columns are constant defaults: adding them rewrites nothing, and
-- the hot enqueue statement does not mention them (jobs that need a
-- version above 1 or a dependency are stamped right after insert).
ALTER TABLE jobs
    ADD COLUMN payload_version int NOT NULL DEFAULT 1 CHECK (payload_version > 0),
    ADD COLUMN depends_on      bigint,
    -- Set on a job some other job depends on, so that only such jobs pay
    -- for the trigger below.
    ADD COLUMN has_dependents  boolean NOT NULL DEFAULT false;

-- Dependents of a job, for release and for the dashboard ("waits for" /
-- "needed by"); few rows.
CREATE INDEX jobs_depends_on_idx ON jobs (depends_on) WHERE depends_on IS NOT NULL;

-- A waiting dependent is pending with available_at = 9999-12-31 (a finite
-- "never": drivers cannot scan 'infinity' into a time), so the claim never
-- sees it; when its prerequisite succeeds it becomes due, when
-- the prerequisite is dead or cancelled it is cancelled with the reason.
-- The WHEN clause keeps ordinary completions free of this trigger.
-- +goose StatementBegin
CREATE FUNCTION jobs_release_dependents() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'succeeded' THEN
        UPDATE jobs SET available_at = NEW.finished_at
         WHERE depends_on = NEW.id AND state = 'pending' AND available_at = '9999-12-31 00:00:00+00';
    ELSE
        UPDATE jobs SET state = 'cancelled', finished_at = NEW.finished_at,
               last_error = format('dependency job %s ended %s', NEW.id, NEW.state)
         WHERE depends_on = NEW.id AND state = 'pending';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER jobs_release_dependents AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (NEW.has_dependents AND OLD.state IS DISTINCT FROM NEW.state
          AND NEW.state IN ('succeeded', 'dead', 'cancelled'))
    EXECUTE FUNCTION jobs_release_dependents();

-- Paused kinds and queues: their pending jobs are not claimed.
CREATE TABLE job_pauses (
    scope     text NOT NULL CHECK (scope IN ('kind', 'queue')),
    name      text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    reason    text NOT NULL CHECK (length(btrim(reason)) BETWEEN 1 AND 500),
    paused_by bigint REFERENCES users(id),
    -- Paused by the failure-rate guard rather than a person.
    auto      boolean NOT NULL DEFAULT false,
    paused_at timestamptz NOT NULL,
    PRIMARY KEY (scope, name)
);

-- Every pause and resume, append-only: a pause spans tenants, so its
-- record lives here rather than in one tenant's trail.
CREATE TABLE job_pause_log (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope     text NOT NULL,
    name      text NOT NULL,
    action    text NOT NULL CHECK (action IN ('paused', 'resumed')),
    reason    text NOT NULL,
    actor_id  bigint REFERENCES users(id),
    auto      boolean NOT NULL DEFAULT false,
    at        timestamptz NOT NULL,
    detail    jsonb NOT NULL DEFAULT '{}'
);
REVOKE ALL ON job_pauses, job_pause_log FROM jejak_app;
REVOKE UPDATE, DELETE, TRUNCATE ON job_pause_log FROM jejak_system;
