-- name: SessionFind :one
SELECT data FROM sessions WHERE token = sqlc.arg('token') AND current_timestamp < expiry;

-- name: SessionCommit :exec
-- Every request writes its session (the idle timeout moves the expiry), so
-- this commit would add a WAL flush to every page. It commits
-- asynchronously instead (synchronous_commit off for its own transaction
-- only): a crash can lose the last moments of session refreshes and
-- sign-ins, which costs a sign-in, never access. SessionDelete (sign-out)
-- stays synchronous, and its flush carries every earlier session write.
WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
INSERT INTO sessions (token, data, expiry)
SELECT sqlc.arg('token'), sqlc.arg('data'), sqlc.arg('expiry') FROM async
ON CONFLICT (token) DO UPDATE SET data = EXCLUDED.data, expiry = EXCLUDED.expiry;

-- name: SessionDelete :exec
DELETE FROM sessions WHERE token = sqlc.arg('token');
