-- name: SignInThrottleReserve :one
-- Counts one attempt for key in its window (a new window once the old one
-- has passed) and returns the count including this attempt. The row lock
-- of the upsert serialises parallel attempts on one key.
INSERT INTO signin_throttle AS t (key, window_start, attempts)
VALUES (sqlc.arg('key'), coalesce(sqlc.narg('now')::timestamptz, now()), 1)
ON CONFLICT (key) DO UPDATE SET
    window_start = CASE WHEN t.window_start <= coalesce(sqlc.narg('now')::timestamptz, now()) - sqlc.arg('window')::interval
                        THEN coalesce(sqlc.narg('now')::timestamptz, now()) ELSE t.window_start END,
    attempts = CASE WHEN t.window_start <= coalesce(sqlc.narg('now')::timestamptz, now()) - sqlc.arg('window')::interval
                    THEN 1 ELSE t.attempts + 1 END
RETURNING attempts, window_start, coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS now;

-- name: SignInThrottleRefund :exec
-- Gives back one attempt on each key (reserved but never used, or a
-- success). The rows are locked in key order, the order reservations take
-- them in: a plain UPDATE locks them in scan order, which updates change,
-- and two sign-ins of one account from one address then deadlocked.
UPDATE signin_throttle t SET attempts = greatest(t.attempts - 1, 0)
  FROM (SELECT key FROM signin_throttle WHERE key = ANY(sqlc.arg('keys')::text[]) ORDER BY key FOR UPDATE) k
 WHERE t.key = k.key;

-- name: SignInThrottleReset :exec
DELETE FROM signin_throttle WHERE key = sqlc.arg('key');

-- name: SignInThrottlePrune :exec
DELETE FROM signin_throttle
WHERE window_start < coalesce(sqlc.narg('now')::timestamptz, now()) - sqlc.arg('older_than')::interval;

-- name: WebSecretGet :one
SELECT secret FROM web_secrets WHERE name = sqlc.arg('name');
