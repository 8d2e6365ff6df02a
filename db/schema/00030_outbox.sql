-- +goose Up
-- The transactional outbox: domain code inserts a message in
-- the same transaction as its change; relays on every replica claim,
-- publish to NATS JetStream and mark messages delivered. See docs/outbox.md.
SET LOCAL ROLE jejak_owner;

CREATE TABLE outbox_messages (
    -- Also the JetStream message id (Nats-Msg-Id), so a re-publish after a
    -- crash or a reclaim is absorbed by the stream's duplicate window.
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id      bigint NOT NULL REFERENCES tenants(id),
    event_type     text NOT NULL CHECK (event_type ~ '^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*$' AND length(event_type) <= 100),
    aggregate_type text NOT NULL CHECK (length(aggregate_type) BETWEEN 1 AND 100),
    aggregate_id   text NOT NULL CHECK (length(aggregate_id) BETWEEN 1 AND 200),
    payload        jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    trace_id       text NOT NULL DEFAULT '' CHECK (length(trace_id) <= 200),
    created_at     timestamptz NOT NULL,
    state          text NOT NULL DEFAULT 'pending'
                   CHECK (state IN ('pending', 'processing', 'delivered', 'failed')),
    attempts       int NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- Retries wait here (backoff); a new message is available at once.
    available_at   timestamptz NOT NULL,
    last_error     text,
    reserved_by    text,
    reserved_at    timestamptz,
    processed_at   timestamptz,
    CHECK (state <> 'processing' OR (reserved_by IS NOT NULL AND reserved_at IS NOT NULL)),
    CHECK (state <> 'delivered' OR processed_at IS NOT NULL)
);

-- The claim path: pending rows in id order. Rows leave it when claimed.
CREATE INDEX outbox_pending_idx ON outbox_messages (id) WHERE state = 'pending';
-- Per-aggregate order: "is an older message of this aggregate still
-- undelivered?" is one probe of this index. Delivered rows leave it, so it
-- stays as small as the backlog.
CREATE INDEX outbox_aggregate_idx ON outbox_messages (tenant_id, aggregate_type, aggregate_id, id)
    WHERE state <> 'delivered';
-- Reclaim of zombie reservations; few rows at any time.
CREATE INDEX outbox_processing_idx ON outbox_messages (reserved_at) WHERE state = 'processing';
-- Failed messages wait for an operator.
CREATE INDEX outbox_failed_idx ON outbox_messages (tenant_id, id) WHERE state = 'failed';
-- No index serves retention: every index costs each claim and delivery,
-- and delivered rows are oldest first in id order, so pruning walks the
-- primary key from the start (OutboxPrune).

ALTER TABLE outbox_messages SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000,
                                 autovacuum_analyze_scale_factor = 0.05);

ALTER TABLE outbox_messages ENABLE ROW LEVEL SECURITY;
ALTER TABLE outbox_messages FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON outbox_messages TO jejak_app
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY system_access ON outbox_messages TO jejak_system USING (true) WITH CHECK (true);
-- Tenant-facing code may only add messages (and read back the id it got);
-- the relay and the staff console run as jejak_system.
REVOKE SELECT, UPDATE, DELETE ON outbox_messages FROM jejak_app;
GRANT SELECT (id) ON outbox_messages TO jejak_app;

-- Wake sleeping relays. Statement-level and folded per transaction, like
-- jobs_notify_insert; polling stays the ground truth.
-- +goose StatementBegin
CREATE FUNCTION outbox_notify_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('jejak_outbox', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_notify_insert AFTER INSERT ON outbox_messages
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify_insert();

-- Per-minute delivered/failed counts for the staff page's throughput chart:
-- one upsert per relay batch, read for the last hour, pruned by the
-- maintenance leader. Not tenant data.
CREATE TABLE outbox_stats_minute (
    minute    timestamptz PRIMARY KEY,
    delivered bigint NOT NULL DEFAULT 0 CHECK (delivered >= 0),
    failed    bigint NOT NULL DEFAULT 0 CHECK (failed >= 0)
);
REVOKE ALL ON outbox_stats_minute FROM jejak_app;
