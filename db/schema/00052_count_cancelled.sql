-- +goose Up
-- A job cancelled before it finished (pending or running -> cancelled:
-- a cancel by hand, a dependency that died) leaves the unfinished count.
-- The statements of the engine and the console write their own counts in
-- a CTE; this row trigger covers cancellation from any statement, so a new
-- cancel path cannot leave the overview's pending count behind. Its WHEN
-- clause is evaluated in the executor per updated row without calling the
-- function, so claims and completions (never -> cancelled) pay only that
-- comparison.
SET LOCAL ROLE jejak_owner;

-- +goose StatementBegin
CREATE FUNCTION jobs_count_cancelled() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_count_deltas (tenant_id, kind, unfinished) VALUES (NEW.tenant_id, NEW.kind, -1);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER jobs_count_cancelled AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (OLD.state IN ('pending', 'running') AND NEW.state = 'cancelled')
    EXECUTE FUNCTION jobs_count_cancelled();
