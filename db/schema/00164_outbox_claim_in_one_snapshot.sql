-- +goose Up
-- The claim marks what it picked in a statement of its own, inside the
-- function, after the picking. The relay's claim was one UPDATE whose
-- WHERE called outbox_claimable: the UPDATE's snapshot is taken when the
-- statement starts, before the claim waits for its turn, while the
-- picking statements take theirs after. A message that was processing
-- when the claim started and went back to pending while it waited (a
-- message released unsent behind a failed one of its aggregate, or a
-- failed one an operator retried) was picked by the function with the
-- messages after it in its aggregate, but the UPDATE saw it still
-- processing and skipped it: the later messages were claimed and
-- published before it (TestPerAggregateOrderWithSeveralRelays caught
-- one). Marked in the function, every picked message is pending when it
-- is marked (only a claim changes a pending row, and claims take turns),
-- so a claim takes exactly what it picked.
SET LOCAL ROLE jejak_owner;

-- +goose StatementBegin
CREATE FUNCTION outbox_claim(lim int, at timestamptz, worker text) RETURNS SETOF outbox_messages
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    ids bigint[];
BEGIN
    -- Its own statement: the UPDATE below must take its snapshot after
    -- the turn, which outbox_claimable waits for.
    ids := outbox_claimable(lim, at);
    RETURN QUERY
    WITH picked AS (
        UPDATE outbox_messages m
           SET state = 'processing', attempts = m.attempts + 1, reserved_by = worker, reserved_at = at
         WHERE m.id = ANY(ids) AND m.state = 'pending'
        RETURNING m.*
    )
    SELECT * FROM picked;
END
$$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION outbox_claim(int, timestamptz, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION outbox_claim(int, timestamptz, text) TO jejak_system;
