-- +goose Up
-- Trace index for outbox messages, for the incident page: like job_traces,
-- an insert-only side table filled by a statement trigger at publish, so
-- the relay's state changes (pending → processing → delivered, never HOT
-- because state is in the partial-index predicates) do not carry one more
-- index. Messages without a trace are not indexed.
SET LOCAL ROLE jejak_owner;

CREATE TABLE outbox_traces (
    trace_id   text   NOT NULL,
    message_id bigint NOT NULL,
    tenant_id  bigint NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (trace_id, message_id)
);
CREATE INDEX outbox_traces_created_brin ON outbox_traces USING brin (created_at);

ALTER TABLE outbox_traces ENABLE ROW LEVEL SECURITY;
ALTER TABLE outbox_traces FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON outbox_traces TO jejak_app
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY system_access ON outbox_traces TO jejak_system USING (true) WITH CHECK (true);
REVOKE UPDATE, DELETE ON outbox_traces FROM jejak_app;
REVOKE UPDATE ON outbox_traces FROM jejak_system;

-- +goose StatementBegin
CREATE FUNCTION outbox_index_traces() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox_traces (trace_id, message_id, tenant_id, created_at)
    SELECT trace_id, id, tenant_id, created_at FROM new_messages WHERE trace_id <> '';
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_index_traces AFTER INSERT ON outbox_messages
    REFERENCING NEW TABLE AS new_messages
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_index_traces();

INSERT INTO outbox_traces (trace_id, message_id, tenant_id, created_at)
SELECT trace_id, id, tenant_id, created_at FROM outbox_messages WHERE trace_id <> '';

-- A message's webhook deliveries (the event id is the outbox id). Delivery
-- updates change no indexed column, so they stay HOT and this index costs
-- nothing after the insert.
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (event_id);
