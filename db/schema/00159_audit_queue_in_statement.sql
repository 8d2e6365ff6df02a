-- +goose Up
-- An event is queued for the sealer by the statement that inserts it (each
-- insert of audit_events in db/query is a data-modifying CTE that adds the
-- events' audit_unsealed rows), not by a statement-level trigger. The
-- trigger's transition table, its PL/pgSQL call and its separate INSERT
-- cost more than the queue row itself: 64 writers of one tenant, each
-- inserting a project and its event (pgbench, CPU-bound), committed about
-- 16 % more audited transactions a second with the queue row written by
-- the same statement. The queue still commits or rolls back with its
-- events, in the statement that wrote them; an event inserted by hand
-- without its queue row is what AuditUnsealedOrphans reports and
-- `web audit verify` names ("neither sealed nor queued").
SET LOCAL ROLE jejak_owner;

DROP TRIGGER audit_events_queue ON audit_events;
DROP FUNCTION audit_queue_events();
