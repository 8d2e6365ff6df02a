-- +goose Up
-- Whether an open breaker's holder is still waiting it out: its delivery
-- pending and not held, and its job still to run. Taking the holder's
-- place (WebhookEndpointTakeHolder) and the held sweep's listing
-- (WebhookHeldEndpoints) both ask it, so the rule is written once. Not
-- inlined (its body has subqueries), which costs a plan per call: both
-- callers run only behind open breakers or once per endpoint per pass.
-- It runs as its caller, under the caller's row-level security.
SET LOCAL ROLE jejak_owner;

-- +goose StatementBegin
CREATE FUNCTION webhook_holder_waits(p_tenant bigint, p_holder bigint, p_job bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM public.webhook_deliveries d
                    WHERE d.tenant_id = p_tenant AND d.id = p_holder
                      AND d.state = 'pending' AND d.held_at IS NULL)
       AND EXISTS (SELECT 1 FROM public.jobs j
                    WHERE j.tenant_id = p_tenant AND j.id = p_job
                      AND j.state IN ('pending', 'running'))
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION webhook_holder_waits(bigint, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_holder_waits(bigint, bigint, bigint) TO jejak_app, jejak_system;
