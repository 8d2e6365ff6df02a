-- +goose Up
-- Signed tenant webhooks: endpoints an owner manages, one
-- delivery per (event, endpoint) and every attempt's outcome.
SET LOCAL ROLE jejak_owner;

CREATE TABLE webhook_endpoints (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   bigint NOT NULL REFERENCES tenants(id),
    url         text NOT NULL CHECK (url ~ '^https?://' AND length(url) <= 2000),
    -- '{*}' = every event type.
    events      text[] NOT NULL CHECK (cardinality(events) BETWEEN 1 AND 50),
    enabled     boolean NOT NULL DEFAULT true,
    -- Why the endpoint was disabled (by its owner, or by a 410 Gone).
    disabled_reason text,
    -- The signing key, "whsec_" + base64. Stored readable because signing
    -- needs it; shown to the owner once, at creation or rotation.
    secret      text NOT NULL CHECK (secret LIKE 'whsec_%'),
    -- After a rotation the old key also signs until it expires, so
    -- receivers can switch keys without dropping deliveries.
    previous_secret            text,
    previous_secret_expires_at timestamptz,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX webhook_endpoints_tenant_idx ON webhook_endpoints (tenant_id, id);

CREATE TABLE webhook_deliveries (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    bigint NOT NULL REFERENCES tenants(id),
    endpoint_id  bigint NOT NULL REFERENCES webhook_endpoints(id),
    -- The outbox message id: the event's identity (webhook-id "evt_<id>").
    event_id     bigint NOT NULL,
    event_type   text NOT NULL,
    -- The exact body POSTed (and signed) on every attempt.
    body         text NOT NULL,
    state        text NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'succeeded', 'failed')),
    attempts     int NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz,
    last_status  int,
    last_error   text,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    -- One delivery per event and endpoint, whatever the broker redelivers.
    UNIQUE (tenant_id, endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (tenant_id, endpoint_id, id);

CREATE TABLE webhook_attempts (
    tenant_id    bigint NOT NULL REFERENCES tenants(id),
    delivery_id  bigint NOT NULL REFERENCES webhook_deliveries(id),
    attempt      int NOT NULL CHECK (attempt > 0),
    attempted_at timestamptz NOT NULL,
    status_code  int,
    latency_ms   int NOT NULL CHECK (latency_ms >= 0),
    -- The first 1 KiB of the response body.
    response     text NOT NULL DEFAULT '',
    error        text,
    PRIMARY KEY (tenant_id, delivery_id, attempt)
);

-- +goose StatementBegin
DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['webhook_endpoints', 'webhook_deliveries', 'webhook_attempts'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_isolation ON %I TO jejak_app USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id())', t);
        EXECUTE format('CREATE POLICY system_access ON %I TO jejak_system USING (true) WITH CHECK (true)', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
-- Endpoints are removed by disabling them (their deliveries stay readable);
-- attempts are a log.
REVOKE DELETE ON webhook_endpoints, webhook_deliveries FROM jejak_app;
REVOKE UPDATE, DELETE ON webhook_attempts FROM jejak_app;
