-- +goose Up
-- A function is executable by PUBLIC unless revoked, and three SECURITY
-- DEFINER functions never were: app_is_member(), audit_search_ids() and
-- audit_namesakes() answered any role of the cluster, which could set
-- app.tenant_id and app.user_id itself and ask, as the tables' owner,
-- whether a user belongs to a tenant or which events name someone. Only
-- the pools' roles need them (the tenant policies run app_is_member for
-- jejak_app; the trail's search runs on both pools), and each already
-- holds its own grant.
SET LOCAL ROLE jejak_owner;

REVOKE EXECUTE ON FUNCTION app_is_member() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION audit_search_ids(text, bigint, integer, text[], text, text, text, text, bigint, text, bigint,
    timestamptz, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION audit_namesakes(text, text) FROM PUBLIC;
