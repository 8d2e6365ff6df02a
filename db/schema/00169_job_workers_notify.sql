-- +goose Up
-- A worker's share of the tenants depends on how many workers share its
-- queues (internal/job/affinity.go), which each worker learns at its
-- heartbeat. A worker that joins or leaves the table notifies the others'
-- heartbeat sessions, which beat at once: the shares are counted again in
-- milliseconds instead of one heartbeat interval later, during which the
-- old workers still took the shares of the old count (two workers on one
-- tenant, or a tenant nobody's own). Row triggers on INSERT and DELETE
-- only: a beat's upsert that updates the row fires neither, so the
-- notifications come at joins and leaves, not at every beat.
SET LOCAL ROLE jejak_owner;

-- +goose StatementBegin
CREATE FUNCTION job_workers_notify() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM pg_notify('jejak_workers', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER job_workers_joined AFTER INSERT ON job_workers
    FOR EACH ROW EXECUTE FUNCTION job_workers_notify();
CREATE TRIGGER job_workers_left AFTER DELETE ON job_workers
    FOR EACH ROW EXECUTE FUNCTION job_workers_notify();

