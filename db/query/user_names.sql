-- name: UserNameList :many
-- Display names of several users in one round trip (the audit timeline
-- names every actor on a page with one query, never one per row).
SELECT id, name FROM users WHERE id = ANY(sqlc.arg('ids')::bigint[]);
