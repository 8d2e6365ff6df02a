-- +goose Up
-- Sensitive work: disabled memberships, the session
-- index that lets an access revocation find a user's sessions, two-person
-- approvals, the idempotency store, resource locks with a lease, and the
-- once-an-hour memory of staff reads of a tenant's trail.
SET LOCAL ROLE jejak_owner;

-- A disabled membership keeps its row (the history stays readable) but no
-- longer admits its user to the tenant.
ALTER TABLE memberships
    ADD COLUMN disabled_at     timestamptz,
    ADD COLUMN disabled_reason text CHECK (length(disabled_reason) <= 500);

-- scs stores session data as an opaque gob blob; this index, written at
-- sign-in, names the user behind each session token so revoking a user's
-- access can delete exactly their sessions.
CREATE TABLE user_sessions (
    token      text PRIMARY KEY,
    user_id    bigint NOT NULL REFERENCES users(id),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_sessions_user_idx ON user_sessions (user_id);

-- Two-person actions (S7): a staff member requests, a different staff
-- member approves or rejects, and the job the approval enqueues consumes
-- it exactly once at dequeue.
CREATE TABLE approvals (
    tenant_id       bigint NOT NULL REFERENCES tenants(id),
    id              bigint GENERATED ALWAYS AS IDENTITY,
    action          text NOT NULL CHECK (action IN ('user.disable-access', 'job.replay')),
    -- What the action applies to: a user id or a job id, by action.
    target_id       bigint NOT NULL,
    reason          text NOT NULL CHECK (length(btrim(reason)) BETWEEN 1 AND 500),
    requested_by    bigint NOT NULL REFERENCES users(id),
    requested_at    timestamptz NOT NULL,
    -- A request nobody decided on in time cannot be approved any more.
    expires_at      timestamptz NOT NULL,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved', 'rejected')),
    decided_by      bigint REFERENCES users(id),
    decided_at      timestamptz,
    decision_reason text CHECK (length(decision_reason) <= 500),
    -- The job the approval enqueued, and when that job used it up.
    job_id          bigint,
    consumed_at     timestamptz,
    consumed_by_job bigint,
    -- The request's trace: the approval and the job it leads to share it.
    trace_id        text NOT NULL,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (id),
    -- Two people, enforced by the database as well as the service.
    CHECK (decided_by IS NULL OR decided_by <> requested_by),
    CHECK ((state = 'pending') = (decided_at IS NULL)),
    CHECK (consumed_at IS NULL OR state = 'approved')
);
CREATE INDEX approvals_pending_idx ON approvals (requested_at) WHERE state = 'pending';

-- Idempotency store (S4): the first processing of a key inserts its row
-- with ON CONFLICT DO NOTHING; a replay finds it and returns result_ref.
CREATE TABLE idempotency_keys (
    tenant_id          bigint NOT NULL REFERENCES tenants(id),
    key                text NOT NULL CHECK (length(key) BETWEEN 1 AND 300),
    action             text NOT NULL CHECK (length(action) BETWEEN 1 AND 100),
    target             text NOT NULL CHECK (length(target) BETWEEN 1 AND 200),
    status             text NOT NULL CHECK (status IN ('started', 'completed')),
    result_ref         text,
    job_id             bigint,
    first_processed_at timestamptz NOT NULL,
    completed_at       timestamptz,
    PRIMARY KEY (tenant_id, key)
);

-- Resource locks with a lease (S5): held by one job at a time, taken over
-- by anyone once the lease has passed (a crashed holder never leaks it).
CREATE TABLE resource_locks (
    resource         text PRIMARY KEY CHECK (length(resource) BETWEEN 1 AND 200),
    tenant_id        bigint NOT NULL REFERENCES tenants(id),
    holder           text NOT NULL,
    acquired_at      timestamptz NOT NULL,
    lease_expires_at timestamptz NOT NULL
);

-- One staff.viewed_audit event per staff member, tenant and hour: the
-- insert that wins the hour records the event.
CREATE TABLE staff_audit_views (
    tenant_id bigint NOT NULL REFERENCES tenants(id),
    staff_id  bigint NOT NULL REFERENCES users(id),
    hour      timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, staff_id, hour)
);

-- Approvals, locks and staff views are staff machinery: the tenant-facing
-- role has no business with them. The idempotency store is written by
-- handlers under the tenant's scope.
REVOKE ALL ON approvals, resource_locks, staff_audit_views FROM jejak_app;

-- +goose StatementBegin
DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['approvals', 'idempotency_keys', 'resource_locks', 'staff_audit_views'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_isolation ON %I TO jejak_app USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id())', t);
        EXECUTE format('CREATE POLICY system_access ON %I TO jejak_system USING (true) WITH CHECK (true)', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
