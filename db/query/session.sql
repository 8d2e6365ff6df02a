-- name: SessionFind :one
SELECT data FROM sessions WHERE token = sqlc.arg('token') AND current_timestamp < expiry;

-- name: SessionCommit :exec
INSERT INTO sessions (token, data, expiry) VALUES (sqlc.arg('token'), sqlc.arg('data'), sqlc.arg('expiry'))
ON CONFLICT (token) DO UPDATE SET data = EXCLUDED.data, expiry = EXCLUDED.expiry;

-- name: SessionDelete :exec
DELETE FROM sessions WHERE token = sqlc.arg('token');
