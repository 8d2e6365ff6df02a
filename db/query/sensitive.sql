-- name: IdempotencyClaim :one
-- The atomic claim (S4): a row back means this call is the first.
INSERT INTO idempotency_keys (tenant_id, key, action, target, status, job_id, first_processed_at)
VALUES ($1, $2, $3, $4, 'started', $5, $6)
ON CONFLICT (tenant_id, key) DO NOTHING
RETURNING *;

-- name: IdempotencyGet :one
SELECT * FROM idempotency_keys WHERE tenant_id = $1 AND key = $2;

-- name: IdempotencyComplete :exec
UPDATE idempotency_keys SET status = 'completed', result_ref = $3, completed_at = $4
 WHERE tenant_id = $1 AND key = $2;

-- name: LockAcquire :one
-- Taken when free, expired, or already ours (a retry of the same holder).
INSERT INTO resource_locks (resource, tenant_id, holder, acquired_at, lease_expires_at)
VALUES (sqlc.arg(resource), sqlc.arg(tenant_id), sqlc.arg(holder), sqlc.arg(now), sqlc.arg(lease_expires_at))
ON CONFLICT (resource) DO UPDATE
   SET holder = EXCLUDED.holder, tenant_id = EXCLUDED.tenant_id,
       acquired_at = EXCLUDED.acquired_at, lease_expires_at = EXCLUDED.lease_expires_at
 WHERE resource_locks.lease_expires_at <= EXCLUDED.acquired_at OR resource_locks.holder = EXCLUDED.holder
RETURNING holder;

-- name: LockRelease :execrows
DELETE FROM resource_locks WHERE resource = $1 AND holder = $2;

-- name: LockGet :one
SELECT * FROM resource_locks WHERE resource = $1;

-- name: MembershipDisable :one
UPDATE memberships SET disabled_at = $3, disabled_reason = $4
 WHERE tenant_id = $1 AND user_id = $2 AND disabled_at IS NULL
RETURNING *;

-- name: UserSessionsRevoke :execrows
-- Deletes the user's server-side sessions (scs rows) and their index rows.
WITH gone AS (
    DELETE FROM user_sessions WHERE user_id = $1 RETURNING token
)
DELETE FROM sessions WHERE token IN (SELECT token FROM gone);

-- name: UserSessionTrack :exec
INSERT INTO user_sessions (token, user_id) VALUES ($1, $2)
ON CONFLICT (token) DO UPDATE SET user_id = EXCLUDED.user_id;

-- name: StaffAuditViewClaim :one
INSERT INTO staff_audit_views (tenant_id, staff_id, hour) VALUES ($1, $2, $3)
ON CONFLICT DO NOTHING
RETURNING tenant_id;

-- name: JobDelay :one
-- A job that could not start its effect (lock busy, unknown payload
-- version) goes back to pending for later without using up the attempt.
-- Fenced by the claim token (worker, attempt) like completion: a delay
-- that arrives after the lease was rescued and the job claimed again,
-- even by the same worker, must not touch the newer attempt. "Lease set"
-- rather than "state = running", so the planner takes the primary key and
-- never jobs_running_idx (see JobSetCompletedMany).
UPDATE jobs
   SET state = 'pending', attempt = greatest(attempt - 1, 0), lease_expires_at = NULL,
       available_at = sqlc.arg(available_at)
 WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) AND lease_expires_at IS NOT NULL
   AND worker_id = sqlc.arg(worker_id)::text AND attempt = sqlc.arg(attempt)::int
RETURNING id;

-- name: MembershipLiftDisable :one
-- Gives a staff-disabled membership its access back; returns the reason it
-- was disabled for.
UPDATE memberships m SET disabled_at = NULL, disabled_reason = NULL
  FROM memberships old
 WHERE m.tenant_id = $1 AND m.user_id = $2 AND m.disabled_at IS NOT NULL
   AND old.tenant_id = m.tenant_id AND old.user_id = m.user_id
RETURNING coalesce(old.disabled_reason, '')::text AS was_reason;
