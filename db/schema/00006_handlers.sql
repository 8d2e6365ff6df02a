-- +goose Up
-- Tables behind the first shipped job kinds: the dev mail sink
-- (email.weekly-report), subscription status history (subscription.sweep)
-- and the points ledger with its dedup table (points.award).
SET LOCAL ROLE jejak_owner;

-- The default Mailer when no SMTP server is configured: every message a
-- tenant would have been sent lands here, readable from the dashboard.
-- message_id is the Message-ID header; it is unique per tenant so a
-- redelivered job does not store the same mail twice.
CREATE TABLE mail_messages (
    tenant_id  bigint NOT NULL REFERENCES tenants(id),
    id         bigint GENERATED ALWAYS AS IDENTITY,
    message_id text NOT NULL CHECK (length(message_id) BETWEEN 1 AND 300),
    from_addr  text NOT NULL,
    to_addrs   text[] NOT NULL CHECK (cardinality(to_addrs) > 0),
    subject    text NOT NULL,
    body       text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, message_id)
);

-- Every status the sweep moves a subscription through, appended, never
-- rewritten: subscriptions keeps only the current status.
CREATE TABLE subscription_status_changes (
    tenant_id   bigint NOT NULL REFERENCES tenants(id),
    id          bigint GENERATED ALWAYS AS IDENTITY,
    from_status text NOT NULL,
    to_status   text NOT NULL CHECK (to_status IN ('active', 'grace', 'expired', 'cancelled')),
    changed_at  timestamptz NOT NULL,
    -- The sweep job that made the change (no FK: jobs are pruned).
    job_id      bigint,
    PRIMARY KEY (tenant_id, id)
);

-- Dedup memory for idempotent consumers: a consumer
-- claims a message by inserting its id with ON CONFLICT DO NOTHING in the
-- same transaction as its effect; zero rows inserted means "already done".
CREATE TABLE processed_messages (
    tenant_id    bigint NOT NULL REFERENCES tenants(id),
    consumer     text NOT NULL CHECK (length(consumer) BETWEEN 1 AND 100),
    message_id   text NOT NULL CHECK (length(message_id) BETWEEN 1 AND 200),
    processed_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, consumer, message_id)
);

-- Points ledger: one row per award; the balance below is its running sum.
-- (tenant_id, message_id) is unique as a second line of defence behind
-- processed_messages.
CREATE TABLE points_ledger (
    tenant_id  bigint NOT NULL REFERENCES tenants(id),
    id         bigint GENERATED ALWAYS AS IDENTITY,
    customer   text NOT NULL CHECK (length(customer) BETWEEN 1 AND 200),
    points     bigint NOT NULL CHECK (points > 0),
    reason     text NOT NULL DEFAULT '',
    message_id text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, message_id)
);
CREATE INDEX points_ledger_customer_idx ON points_ledger (tenant_id, customer, id);

CREATE TABLE points_balances (
    tenant_id  bigint NOT NULL REFERENCES tenants(id),
    customer   text NOT NULL,
    balance    bigint NOT NULL CHECK (balance >= 0),
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, customer)
);

-- History and dedup rows are facts: the application may add them, never
-- rewrite or remove them (retention, if ever, is an owner's job).
REVOKE UPDATE, DELETE ON subscription_status_changes, processed_messages, points_ledger, mail_messages FROM jejak_app;

-- +goose StatementBegin
DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['mail_messages', 'subscription_status_changes', 'processed_messages', 'points_ledger', 'points_balances'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_isolation ON %I TO jejak_app USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id())', t);
        EXECUTE format('CREATE POLICY system_access ON %I TO jejak_system USING (true) WITH CHECK (true)', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
