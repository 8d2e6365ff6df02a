-- +goose Up
-- A worker's share of the tenants (internal/job/affinity.go): the tenants
-- whose id modulo the number of live workers of its queues is its rank.
-- The job claim walks a share, and a replica's audit sealer and indexer
-- take the same one; the rule is written here once for all three. Both are
-- plain expressions (IMMUTABLE SQL functions, inlined into the statements
-- that call them, so the claim's walk still probes jobs_claim_idx).
SET LOCAL ROLE jejak_owner;

-- Whether the tenant is in the share rank of members.
CREATE FUNCTION tenant_in_slot(p_tenant bigint, p_members int, p_rank int) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT p_tenant % p_members = p_rank $$;

-- The first id after p_after in the share rank of members: where a walk
-- of the share's tenants probes next (1 and 0: p_after + 1).
CREATE FUNCTION tenant_slot_after(p_after bigint, p_members int, p_rank int) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT p_after + 1 + ((p_rank - (p_after + 1)) % p_members + p_members) % p_members $$;
