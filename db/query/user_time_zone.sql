-- name: UserSetTimeZone :execrows
-- Saves the zone a staff member reads staff pages in (NULL = UTC).
UPDATE users SET time_zone = sqlc.narg('time_zone') WHERE id = sqlc.arg('id');
