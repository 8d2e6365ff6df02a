-- +goose Up
-- Timeline filters that walk every newer event otherwise: an actor kind
-- ("system" is most of a busy tenant's trail, "staff" a handful) and a
-- far-back date range. Both lead with tenant_id; audit_events is
-- insert-only, so each costs one index entry per event and nothing else.
SET LOCAL ROLE jejak_owner;

-- Keyset on seq within one actor kind.
CREATE INDEX audit_events_actor_kind_idx ON audit_events (tenant_id, actor_kind, seq);

-- A date range: the events of the range, whatever happened since.
CREATE INDEX audit_events_time_idx ON audit_events (tenant_id, occurred_at, seq);
