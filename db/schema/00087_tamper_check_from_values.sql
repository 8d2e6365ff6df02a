-- +goose Up
-- The claim's tamper check, from the values the claim's UPDATE returned
-- instead of reading the batch again by primary key: the claimed rows are
-- already in hand (the payload the handler will get is exactly what is
-- hashed), so the second read of every claimed job (four buffers each) and
-- its index probes go away. The verdict is the same one job_payload_intact
-- gives one row at a time: an oracle that answers "is this the payload
-- signed for this job?" cannot be used to forge a MAC, so it may take the
-- values from the caller.
SET LOCAL ROLE jejak_owner;

-- +goose StatementBegin
CREATE FUNCTION jobs_tampered_rows(ids bigint[], tenant_ids bigint[], kinds text[], payloads jsonb[], hashes bytea[])
RETURNS SETOF bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    ip bytea;
    op bytea;
BEGIN
    SELECT s.ipad, s.opad INTO ip, op FROM public.app_secrets s WHERE s.name = 'job-payload';
    RETURN QUERY
        SELECT r.id
          FROM unnest(ids, tenant_ids, kinds, payloads, hashes) AS r(id, tenant_id, kind, payload, hash)
         WHERE sha256(op || sha256(ip || convert_to(r.id::text || E'\n' || r.tenant_id::text || E'\n' || r.kind || E'\n' || r.payload::text, 'UTF8')))
               IS DISTINCT FROM r.hash;
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION jobs_tampered_rows(bigint[], bigint[], text[], jsonb[], bytea[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobs_tampered_rows(bigint[], bigint[], text[], jsonb[], bytea[]) TO jejak_system;

-- The forms that read the jobs again have no caller left.
DROP FUNCTION jobs_tampered(bigint[], bigint[]);
DROP FUNCTION jobs_tampered(bigint[]);
