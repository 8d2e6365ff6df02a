-- +goose Up
-- The sealer's batch statement (AuditSealBatch) rides with its
-- transaction's COMMIT, so its result is never read: the check that every
-- queued event of the batch moved from the queue to audit_sealed, which the
-- sealer made on the returned count, is made by the statement itself, and
-- a batch that would leave a leaf without its event fails whole.
SET LOCAL ROLE jejak_owner;

-- +goose StatementBegin
CREATE FUNCTION audit_sealed_all(p_moved bigint, p_want int) RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF p_moved <> p_want THEN
        RAISE EXCEPTION 'moved % of % sealed events from the queue', p_moved, p_want
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN p_moved;
END;
$$;
-- +goose StatementEnd
