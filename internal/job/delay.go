package job

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/audit"
)

// delayed is a handler's answer "not now, and not my fault": a resource
// lock held by another job, or a payload version this replica does not
// know. It is not a failure: the attempt is given back.
type delayed struct {
	after  time.Duration
	reason string
}

func (d *delayed) Error() string { return "delayed: " + d.reason }

// Delay tells the engine to put the job back to pending, due after the
// given delay, without counting the attempt; sensitive kinds record a
// delayed event with the reason (e.g. "lock_busy").
func Delay(after time.Duration, reason string) error {
	if after <= 0 {
		after = time.Second
	}
	return &delayed{after: after, reason: reason}
}

// DelayOf reports whether err asks for a delay, and for how long.
func DelayOf(err error) (time.Duration, string, bool) {
	var d *delayed
	if errors.As(err, &d) {
		return d.after, d.reason, true
	}
	return 0, "", false
}

// policyReason is implemented by policy errors that name their cause with
// a short token ("requester_demoted", "approval_consumed").
type policyReason interface{ PolicyReason() string }

// ReasonOf returns the short reason a policy error names, or "".
func ReasonOf(err error) string {
	var r policyReason
	if errors.As(err, &r) {
		return r.PolicyReason()
	}
	return ""
}

// delayJob returns a held job to pending after the delay, recording the
// delayed stage for sensitive kinds in the same transaction.
func (e *Engine) delayJob(ctx context.Context, j *Job, after time.Duration, reason string) error {
	now := e.clock.Now()
	var base time.Time
	if now != nil {
		base = *now
	} else if err := e.pool.QueryRow(ctx, "SELECT now()").Scan(&base); err != nil {
		return fmt.Errorf("delay job %d: read clock: %w", j.ID, err)
	}
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		if err := storeDelay(ctx, tx, j.TenantID, j.ID, j.WorkerID, j.Attempt, base.Add(after)); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrNotHeld
			}
			return fmt.Errorf("delay job %d: %w", j.ID, err)
		}
		if !e.sensitive(j.Kind) {
			return nil
		}
		ev := e.jobEvent(j, audit.JobDelayed, map[string]any{"retry_in": after.String()})
		ev.Reason = reason
		err := audit.NewRecorder(e.clock).RecordJobEvent(ctx, tx, ev)
		return err
	})
}
