-- +goose Up
-- Server secrets the application roles can never read, and the payload MAC
-- of jobs built on one of them.
--
-- app_secrets holds random keys created once, here, and never rotated at
-- start: every replica derives the same values from them. Only the owner
-- role (and the migrating superuser) reads the table. 'role-passwords'
-- derives the passwords of the pools' LOGIN roles (database.EnsureLogins);
-- 'job-payload' keys the HMAC-SHA256 of each job's payload, so whoever can
-- edit a job row cannot compute a matching hash for a payload of their own.
SET LOCAL ROLE jejak_owner;

CREATE TABLE app_secrets (
    name text PRIMARY KEY,
    key  bytea NOT NULL CHECK (length(key) = 32),
    -- HMAC's inner and outer padded keys (key XOR 0x36.., key XOR 0x5c..,
    -- 64 bytes each), precomputed so the MAC is two sha256() calls in SQL.
    ipad bytea NOT NULL CHECK (length(ipad) = 64),
    opad bytea NOT NULL CHECK (length(opad) = 64)
);
REVOKE ALL ON app_secrets FROM PUBLIC, jejak_app, jejak_system;

-- gen_random_uuid draws from the server's strong random source: two of
-- them give 244 random bits, padded to a 32-byte key.
-- +goose StatementBegin
DO $$
DECLARE
    n text;
    k bytea;
    ip bytea;
    op bytea;
BEGIN
    FOREACH n IN ARRAY ARRAY['role-passwords', 'job-payload'] LOOP
        k := decode(replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''), 'hex');
        ip := k || '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea;
        op := ip;
        FOR i IN 0..63 LOOP
            ip := set_byte(ip, i, get_byte(ip, i) # 54);
            op := set_byte(op, i, get_byte(op, i) # 92);
        END LOOP;
        INSERT INTO app_secrets (name, key, ipad, opad) VALUES (n, k, ip, op);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- HMAC-SHA256 (RFC 2104) with a named secret. Not executable by the
-- application roles: it would let them sign anything.
-- +goose StatementBegin
CREATE FUNCTION app_hmac(secret text, msg bytea) RETURNS bytea
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT sha256(s.opad || sha256(s.ipad || msg)) FROM public.app_secrets s WHERE s.name = secret
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION app_hmac(text, bytea) FROM PUBLIC, jejak_app, jejak_system;

-- The MAC binds the payload to its job: id, tenant and kind are part of the
-- message, so a valid hash cannot be copied from another row.
-- +goose StatementBegin
CREATE FUNCTION job_payload_mac(id bigint, tenant_id bigint, kind text, payload jsonb) RETURNS bytea
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT public.app_hmac('job-payload',
        convert_to(id::text || E'\n' || tenant_id::text || E'\n' || kind || E'\n' || payload::text, 'UTF8'))
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION job_payload_mac(bigint, bigint, text, jsonb) FROM PUBLIC, jejak_app, jejak_system;

-- What the engine may ask: is this payload the one signed for this job?
-- An oracle that answers yes/no cannot be used to forge a MAC.
-- +goose StatementBegin
CREATE FUNCTION job_payload_intact(id bigint, tenant_id bigint, kind text, payload jsonb, hash bytea) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT public.job_payload_mac(id, tenant_id, kind, payload) = hash
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION job_payload_intact(bigint, bigint, text, jsonb, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION job_payload_intact(bigint, bigint, text, jsonb, bytea) TO jejak_app, jejak_system;

-- Every insert is signed here, whatever hash the writer supplied. Updates
-- are not re-signed: that is the point.
-- +goose StatementBegin
CREATE FUNCTION jobs_sign_payload() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    NEW.payload_hash := public.job_payload_mac(NEW.id, NEW.tenant_id, NEW.kind, NEW.payload);
    RETURN NEW;
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION jobs_sign_payload() FROM PUBLIC, jejak_app, jejak_system;
CREATE TRIGGER jobs_sign_payload BEFORE INSERT ON jobs
    FOR EACH ROW EXECUTE FUNCTION jobs_sign_payload();

-- Re-sign the jobs already stored (as the migrating user: row-level
-- security is forced on jobs and the owner role has no policy there).
RESET ROLE;
UPDATE jobs SET payload_hash = job_payload_mac(id, tenant_id, kind, payload);
