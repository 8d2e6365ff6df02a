-- name: ApprovalInsert :one
INSERT INTO approvals (tenant_id, action, target_id, reason, requested_by, requested_at, expires_at, trace_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING *;

-- name: ApprovalGet :one
SELECT * FROM approvals WHERE id = $1;

-- name: ApprovalLock :one
SELECT * FROM approvals WHERE id = $1 FOR UPDATE;

-- name: ApprovalDecide :one
UPDATE approvals
   SET state = sqlc.arg(state), decided_by = sqlc.arg(decided_by), decided_at = sqlc.arg(decided_at),
       decision_reason = sqlc.narg(decision_reason)
 WHERE id = sqlc.arg(id) AND state = 'pending'
RETURNING *;

-- name: ApprovalSetJob :exec
UPDATE approvals SET job_id = $2 WHERE id = $1;

-- name: ApprovalConsume :one
-- Single use: only the first job to reach this update gets the row back.
UPDATE approvals
   SET consumed_at = sqlc.arg(now), consumed_by_job = sqlc.arg(job_id)
 WHERE id = sqlc.arg(id) AND state = 'approved' AND consumed_at IS NULL
RETURNING *;

-- name: ApprovalListPending :many
SELECT * FROM approvals WHERE state = 'pending' ORDER BY requested_at, id LIMIT $1;

-- name: ApprovalListRecent :many
SELECT * FROM approvals WHERE state <> 'pending' ORDER BY decided_at DESC, id DESC LIMIT $1;

-- name: ApprovalListByTenant :many
SELECT * FROM approvals WHERE tenant_id = $1 ORDER BY id DESC LIMIT $2;

-- name: ApprovalPendingFor :one
SELECT count(*) FROM approvals
 WHERE tenant_id = $1 AND action = $2 AND target_id = $3 AND state = 'pending';

-- name: JobRefreshExpiry :exec
-- An approved replay gives a sensitive job a fresh time to live.
UPDATE jobs SET expires_at = $3 WHERE tenant_id = $1 AND id = $2 AND state = 'dead' AND expires_at IS NOT NULL;

-- name: ApprovalOtherActiveOwners :one
SELECT count(*) FROM memberships
 WHERE tenant_id = $1 AND role = 'owner' AND disabled_at IS NULL AND user_id <> $2;
