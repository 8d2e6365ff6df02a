-- +goose Up
-- Keys ready for distributing the tenant tables by tenant_id (Citus): every
-- primary key and unique constraint of a table that would be distributed
-- contains tenant_id (leading), and foreign keys between such tables carry
-- it. docs/scaling.md section 3 lists the tables; db/schema/citus_keys_test.go
-- fails when a key of one of them loses tenant_id again.
--
-- Written for a populated database: each new key is over columns already
-- unique (id was unique on its own), so adding it cannot fail on existing
-- rows. The statements take ACCESS EXCLUSIVE locks on the tables they
-- change while their indexes build; run `web migrate` in a quiet window.
SET LOCAL ROLE jejak_owner;

-- jobs: (tenant_id, id). Staff pages and operator actions still address a
-- job by id alone (/admin/jobs/{id}, the newest-first list across tenants,
-- dead-letter bulk actions), so a non-unique id index stays. It is partial,
-- WHERE state <> 'running', and takes the place of jobs_tenant_idx
-- (tenant_id, id) WHERE state <> 'running' of 00050, which the new primary
-- key makes redundant: the claim (pending -> running, never a HOT update)
-- adds no entry to it, so the engine writes exactly as many index entries
-- per job as before (enqueue 4, claim 2, completion 2). Running jobs (few,
-- bounded by the workers) are found by id through jobs_running_idx (see
-- JobGet).
ALTER TABLE jobs DROP CONSTRAINT jobs_pkey;
ALTER TABLE jobs ADD CONSTRAINT jobs_pkey PRIMARY KEY (tenant_id, id);
DROP INDEX jobs_tenant_idx;
CREATE INDEX jobs_id_idx ON jobs (id) WHERE state <> 'running';

-- The claim's tamper check reads the batch by primary key: it takes the
-- tenant of each id as well. The one-array form stays for callers that
-- hold ids alone; it finds them through jobs_id_idx or, when running,
-- jobs_running_idx (it must see every job it is asked about: a job it
-- missed would count as intact).
-- +goose StatementBegin
CREATE FUNCTION jobs_tampered(tenant_ids bigint[], ids bigint[]) RETURNS SETOF bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    ip bytea;
    op bytea;
BEGIN
    SELECT s.ipad, s.opad INTO ip, op FROM public.app_secrets s WHERE s.name = 'job-payload';
    RETURN QUERY
        SELECT j.id FROM public.jobs j
          JOIN unnest(tenant_ids, ids) AS k(tenant_id, id) ON j.tenant_id = k.tenant_id AND j.id = k.id
         WHERE sha256(op || sha256(ip || convert_to(j.id::text || E'\n' || j.tenant_id::text || E'\n' || j.kind || E'\n' || j.payload::text, 'UTF8')))
               IS DISTINCT FROM j.payload_hash;
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION jobs_tampered(bigint[], bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs_tampered(bigint[], bigint[]) TO jejak_system;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION jobs_tampered(ids bigint[]) RETURNS SETOF bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    ip bytea;
    op bytea;
BEGIN
    SELECT s.ipad, s.opad INTO ip, op FROM public.app_secrets s WHERE s.name = 'job-payload';
    RETURN QUERY
        SELECT j.id FROM (
            (SELECT * FROM public.jobs o WHERE o.id = ANY(ids) AND o.state <> 'running')
            UNION ALL
            (SELECT * FROM public.jobs r WHERE r.id = ANY(ids) AND r.state = 'running')) j
         WHERE sha256(op || sha256(ip || convert_to(j.id::text || E'\n' || j.tenant_id::text || E'\n' || j.kind || E'\n' || j.payload::text, 'UTF8')))
               IS DISTINCT FROM j.payload_hash;
END
$$;
-- +goose StatementEnd

-- Dependencies never cross tenants (enqueue refuses a prerequisite of
-- another tenant), so the dependents of a job are looked up, and released,
-- within its tenant.
DROP INDEX jobs_depends_on_idx;
CREATE INDEX jobs_depends_on_idx ON jobs (tenant_id, depends_on) WHERE depends_on IS NOT NULL;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION jobs_release_dependents() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'succeeded' THEN
        UPDATE jobs SET available_at = NEW.finished_at
         WHERE tenant_id = NEW.tenant_id AND depends_on = NEW.id
           AND state = 'pending' AND available_at = '9999-12-31 00:00:00+00';
    ELSE
        UPDATE jobs SET state = 'cancelled', finished_at = NEW.finished_at,
               last_error = format('dependency job %s ended %s', NEW.id, NEW.state)
         WHERE tenant_id = NEW.tenant_id AND depends_on = NEW.id AND state = 'pending';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- A second key on id alone, used by no foreign key.
ALTER TABLE projects DROP CONSTRAINT projects_id_key;
ALTER TABLE approvals DROP CONSTRAINT approvals_id_key;
-- Staff decide an approval by id (/admin/approvals/{id}) across tenants;
-- approvals are rare, so a plain index costs nothing that matters.
CREATE INDEX approvals_id_idx ON approvals (id);
ALTER TABLE invoices DROP CONSTRAINT invoices_id_key;
-- Accepting an invitation finds it by id and e-mail across tenants, through
-- invitations_email_idx.
ALTER TABLE invitations DROP CONSTRAINT invitations_id_key;

-- A charge is refunded once: the charge belongs to one tenant's invoice.
ALTER TABLE payment_refunds DROP CONSTRAINT payment_refunds_charge_ref_key;
ALTER TABLE payment_refunds ADD CONSTRAINT payment_refunds_charge_ref_key UNIQUE (tenant_id, charge_ref);

-- outbox_messages: (tenant_id, id). The relay settles the messages it
-- claimed by (tenant_id, id); outbox_pending_idx (id) still orders the
-- claim across tenants. Retention walks the oldest delivered messages
-- through a partial id index: one entry per message (its delivered row
-- version), where the old primary key had one for each of its three.
ALTER TABLE outbox_messages DROP CONSTRAINT outbox_messages_pkey;
ALTER TABLE outbox_messages ADD CONSTRAINT outbox_messages_pkey PRIMARY KEY (tenant_id, id);
CREATE INDEX outbox_delivered_idx ON outbox_messages (id) WHERE state = 'delivered';

-- Webhooks: keys and the foreign keys between them carry tenant_id, so an
-- endpoint, its deliveries and their attempts live on one shard.
ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_delivery_id_fkey;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_endpoint_id_fkey;
ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_pkey;
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (tenant_id, id);
-- The new primary key is this index.
DROP INDEX webhook_endpoints_tenant_idx;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_pkey;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (tenant_id, id);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_endpoint_fkey
    FOREIGN KEY (tenant_id, endpoint_id) REFERENCES webhook_endpoints (tenant_id, id);
ALTER TABLE webhook_attempts ADD CONSTRAINT webhook_attempts_delivery_fkey
    FOREIGN KEY (tenant_id, delivery_id) REFERENCES webhook_deliveries (tenant_id, id);

-- Trace side tables: tenant first in the key; the incident page looks a
-- trace up across tenants through a plain trace_id index.
ALTER TABLE job_traces DROP CONSTRAINT job_traces_pkey;
ALTER TABLE job_traces ADD CONSTRAINT job_traces_pkey PRIMARY KEY (tenant_id, trace_id, job_id);
CREATE INDEX job_traces_trace_idx ON job_traces (trace_id);
ALTER TABLE outbox_traces DROP CONSTRAINT outbox_traces_pkey;
ALTER TABLE outbox_traces ADD CONSTRAINT outbox_traces_pkey PRIMARY KEY (tenant_id, trace_id, message_id);
CREATE INDEX outbox_traces_trace_idx ON outbox_traces (trace_id);

-- The same columns, tenant first. The alert rules read and prune it by
-- minute across tenants, so a minute index keeps those range scans.
ALTER TABLE alert_principal_minute DROP CONSTRAINT alert_principal_minute_pkey;
ALTER TABLE alert_principal_minute ADD CONSTRAINT alert_principal_minute_pkey PRIMARY KEY (tenant_id, minute, principal);
CREATE INDEX alert_principal_minute_minute_idx ON alert_principal_minute (minute);

-- resource_locks keeps PRIMARY KEY (resource): a lock names a resource
-- outside the tenant's rows (an external account, a file), which two
-- tenants may share, so the table stays a coordinator-local table under
-- Citus rather than a distributed one (docs/scaling.md).
