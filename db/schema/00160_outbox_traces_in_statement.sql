-- +goose Up
-- A message's trace is indexed (outbox_traces, for the forensics search)
-- by the statement that inserts the message, a data-modifying CTE in
-- OutboxInsert and OutboxInsertMany, instead of a statement-level trigger
-- with a transition table: the same reason as 00159 for the audit queue.
-- Every request that creates something publishes a message, so this is
-- on the request path. A message inserted by hand is not indexed by
-- trace; nothing but the forensics search reads the index.
SET LOCAL ROLE jejak_owner;

DROP TRIGGER outbox_index_traces ON outbox_messages;
DROP FUNCTION outbox_index_traces();
