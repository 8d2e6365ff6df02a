// Package sensitive holds what every sensitive job kind needs before and
// around its effect: re-authorization at dequeue (requester, approver and
// approval checked again, the approval consumed once), the idempotency
// store, and resource locks with a lease. A sensitive handler calls them in
// its own transaction so a refusal changes nothing and an effect commits
// with its audit events. docs/sensitive-jobs.md explains the threat model.
package sensitive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
)

// Rejection is a policy failure found at dequeue; Reason is a short token
// recorded with the job's rejected event.
type Rejection struct {
	Reason string
	Detail string
}

func (r *Rejection) Error() string {
	if r.Detail == "" {
		return "rejected: " + r.Reason
	}
	return "rejected: " + r.Reason + ": " + r.Detail
}

// PolicyReason names the rejection for the audit trail (job.ReasonOf).
func (r *Rejection) PolicyReason() string { return r.Reason }

// reject returns a policy failure: the engine dead-letters the job at once,
// flags it and records rejected with the reason.
func reject(reason, detail string, args ...any) error {
	return job.Policy(&Rejection{Reason: reason, Detail: fmt.Sprintf(detail, args...)})
}

// Reasons a sensitive job is rejected at dequeue.
const (
	ReasonExpired          = "job_expired"
	ReasonPayloadTampered  = "payload_tampered"
	ReasonApprovalMissing  = "approval_missing"
	ReasonApprovalMismatch = "approval_mismatch"
	ReasonNotApproved      = "approval_not_approved"
	ReasonApprovalConsumed = "approval_consumed"
	ReasonRequesterGone    = "requester_inactive"
	ReasonRequesterRole    = "requester_lost_role"
	ReasonApproverGone     = "approver_inactive"
	ReasonApproverRole     = "approver_lost_role"
)

// RejectionOf returns the rejection inside err, if any.
func RejectionOf(err error) (*Rejection, bool) {
	var r *Rejection
	ok := errors.As(err, &r)
	return r, ok
}

// Now is the clock's reading, or the transaction's now() when the clock
// defers to the database: the checks below compare stored instants with
// one reading of time.
func Now(ctx context.Context, q database.Querier, c clock.Clock) (time.Time, error) {
	if t := c.Now(); t != nil {
		return *t, nil
	}
	var t time.Time
	if err := q.QueryRow(ctx, "SELECT now()").Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("read database clock: %w", err)
	}
	return t, nil
}
