-- +goose Up
-- Every migration from here on creates its objects as jejak_owner, so the
-- application role never owns what it queries.
SET LOCAL ROLE jejak_owner;

CREATE TABLE tenants (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    slug       text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9]+(-[a-z0-9]+)*$' AND length(slug) <= 63),
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    time_zone  text NOT NULL DEFAULT 'Asia/Jakarta',
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email         text NOT NULL UNIQUE CHECK (email = lower(email) AND position('@' in email) > 1),
    name          text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    password_hash text NOT NULL,
    -- Staff roles are global (not per tenant): support reads and repairs
    -- queues across tenants; admin additionally manages staff.
    staff_role    text CHECK (staff_role IN ('support', 'admin')),
    active        boolean NOT NULL DEFAULT true,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE memberships (
    tenant_id  bigint NOT NULL REFERENCES tenants(id),
    user_id    bigint NOT NULL REFERENCES users(id),
    role       text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id)
);
CREATE INDEX memberships_user_idx ON memberships (user_id);

CREATE TABLE projects (
    tenant_id  bigint NOT NULL REFERENCES tenants(id),
    id         bigint GENERATED ALWAYS AS IDENTITY,
    name       text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 120),
    created_by bigint REFERENCES users(id),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (id)
);

CREATE TABLE plans (
    code            text PRIMARY KEY CHECK (code ~ '^[a-z0-9-]+$'),
    name            text NOT NULL,
    price_idr       bigint NOT NULL CHECK (price_idr >= 0),
    max_projects    int NOT NULL CHECK (max_projects > 0)
);

-- One current subscription per tenant. Its history is never overwritten:
-- every plan change appends a subscription_changes row (the seed's upsert
-- that lost the old plan is the bug this table fixes).
CREATE TABLE subscriptions (
    tenant_id            bigint PRIMARY KEY REFERENCES tenants(id),
    plan_code            text NOT NULL REFERENCES plans(code),
    status               text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'grace', 'expired', 'cancelled')),
    current_period_start timestamptz NOT NULL,
    current_period_end   timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CHECK (current_period_end > current_period_start)
);

CREATE TABLE subscription_changes (
    tenant_id  bigint NOT NULL REFERENCES tenants(id),
    id         bigint GENERATED ALWAYS AS IDENTITY,
    from_plan  text REFERENCES plans(code),
    to_plan    text NOT NULL REFERENCES plans(code),
    changed_by bigint REFERENCES users(id),
    changed_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id)
);

-- Server-side sessions for scs (pgxstore's expected shape).
CREATE TABLE sessions (
    token  text PRIMARY KEY,
    data   bytea NOT NULL,
    expiry timestamptz NOT NULL
);
CREATE INDEX sessions_expiry_idx ON sessions (expiry);
