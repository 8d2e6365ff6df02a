-- name: UserGetByEmail :one
SELECT * FROM users WHERE email = $1;

-- name: UserGetByID :one
SELECT * FROM users WHERE id = $1;

-- name: UserUpsert :one
INSERT INTO users (email, name, password_hash, staff_role) VALUES ($1, $2, $3, $4)
ON CONFLICT (email) DO UPDATE SET name = EXCLUDED.name, staff_role = EXCLUDED.staff_role
RETURNING *;
