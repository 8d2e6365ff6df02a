-- +goose Up
-- Payments: Jejak's invoices and the refunds its
-- reconciliation made, plus the built-in payment provider simulator's own
-- tables (paysim_*), which stand in for an external provider's database:
-- Jejak's code reaches them only over the provider's HTTP API.
SET LOCAL ROLE jejak_owner;

CREATE TABLE invoices (
    tenant_id   bigint NOT NULL REFERENCES tenants(id),
    id          bigint GENERATED ALWAYS AS IDENTITY,
    plan_code   text NOT NULL REFERENCES plans(code),
    amount_idr  bigint NOT NULL CHECK (amount_idr > 0),
    status      text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'paid', 'failed')),
    -- The provider's charge that paid it (the first one, if it was
    -- charged twice; reconciliation refunds the others).
    charge_ref  text,
    created_at  timestamptz NOT NULL,
    paid_at     timestamptz,
    created_by  bigint REFERENCES users(id),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (id)
);

-- One row per duplicate charge refunded: the unique charge makes
-- "refund exactly once" a property of the table, whatever the number of
-- reconciliation runs.
CREATE TABLE payment_refunds (
    tenant_id   bigint NOT NULL REFERENCES tenants(id),
    id          bigint GENERATED ALWAYS AS IDENTITY,
    invoice_id  bigint NOT NULL,
    charge_ref  text NOT NULL UNIQUE,
    refund_ref  text NOT NULL,
    amount_idr  bigint NOT NULL CHECK (amount_idr > 0),
    reason      text NOT NULL,
    created_at  timestamptz NOT NULL,
    job_id      bigint,
    PRIMARY KEY (tenant_id, id)
);

-- +goose StatementBegin
DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['invoices', 'payment_refunds'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_isolation ON %I TO jejak_app USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id())', t);
        EXECUTE format('CREATE POLICY system_access ON %I TO jejak_system USING (true) WITH CHECK (true)', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
REVOKE UPDATE, DELETE ON payment_refunds FROM jejak_app;

-- The simulator's tables: not tenant data (the "provider" knows tenants
-- only as metadata), written only by the simulator on the system pool.
CREATE TABLE paysim_charges (
    id              text PRIMARY KEY,
    idempotency_key text,
    amount          bigint NOT NULL CHECK (amount > 0),
    currency        text NOT NULL,
    tenant_ref      text NOT NULL,
    invoice_ref     text NOT NULL,
    refunded        bigint NOT NULL DEFAULT 0 CHECK (refunded >= 0 AND refunded <= amount),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX paysim_charges_tenant_idx ON paysim_charges (tenant_ref, created_at);

CREATE TABLE paysim_refunds (
    id              text PRIMARY KEY,
    charge_id       text NOT NULL REFERENCES paysim_charges(id),
    idempotency_key text,
    amount          bigint NOT NULL CHECK (amount > 0),
    reason          text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Stored responses by idempotency key, like a provider's: the same key
-- with the same request answers the first response again.
CREATE TABLE paysim_idempotency (
    key        text PRIMARY KEY,
    endpoint   text NOT NULL,
    status     int NOT NULL,
    response   jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
REVOKE ALL ON paysim_charges, paysim_refunds, paysim_idempotency FROM jejak_app;
