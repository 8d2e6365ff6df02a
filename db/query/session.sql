-- name: SessionFind :one
SELECT data, expiry FROM sessions WHERE token = sqlc.arg('token') AND current_timestamp < expiry;

-- name: SessionCommit :exec
-- A request writes its session when the data changed or the idle timeout
-- has moved the expiry far enough (SessionStore.CommitCtx), so this commit
-- would add a WAL flush to many pages. It commits
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
