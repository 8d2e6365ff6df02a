-- name: UserSetLocale :execrows
-- Saves the language a user chose (NULL = follow the browser).
UPDATE users SET locale = sqlc.narg('locale') WHERE id = sqlc.arg('id');
