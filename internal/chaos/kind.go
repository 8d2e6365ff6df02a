// Package chaos holds the job kind the chaos suite runs (chaos_test.go):
// a job whose effect can be counted and is deduplicated, so the suite can
// tell a lost job, a job run twice and an effect applied twice apart. The
// binary registers it only when JEJAK_CHAOS_KIND is set.
package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
)

// Kind is the chaos job kind.
const Kind = "chaos.count"

// EffectsTable is created by the suite, not by a migration: it exists
// only in a chaos database.
const EffectsTable = `CREATE TABLE IF NOT EXISTS chaos_effects (
    tenant_id bigint NOT NULL,
    key       text NOT NULL,
    job_id    bigint NOT NULL,
    attempt   int NOT NULL,
    worker    text NOT NULL,
    deduped   boolean NOT NULL,
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
GRANT SELECT, INSERT ON chaos_effects TO jejak_app`

// Payload is a chaos job's payload.
type Payload struct {
	Key     string `json:"key"`
	SleepMS int    `json:"sleep_ms"`
}

// Register installs the chaos kind on e; its effects go through app.
func Register(e *job.Engine, app database.Pool) {
	e.Register(Kind, handler(app), job.KindOptions{MaxAttempts: 10})
}

// handler works for SleepMS, then, in one tenant transaction, claims the
// payload's key in processed_messages (the product's own dedup table) and
// records the execution in chaos_effects, marked deduped when the key was
// already there. A database outage is waited out inside the handler (the
// engine's backoff is minutes) until the context ends.
func handler(app database.Pool) job.Handler {
	return func(ctx context.Context, j *job.Job) error {
		var p Payload
		if err := json.Unmarshal(j.Payload, &p); err != nil || p.Key == "" {
			return job.Permanent(fmt.Errorf("chaos payload: %v", err))
		}
		if err := clock.Sleep(ctx, time.Duration(p.SleepMS)*time.Millisecond); err != nil {
			return err
		}
		for {
			err := database.InTenantTx(ctx, app, j.TenantID, func(tx pgx.Tx) error {
				tag, err := tx.Exec(ctx, `INSERT INTO processed_messages (tenant_id, consumer, message_id, processed_at)
					VALUES ($1, $2, $3, now()) ON CONFLICT DO NOTHING`, j.TenantID, Kind, p.Key)
				if err != nil {
					return err
				}
				_, err = tx.Exec(ctx, `INSERT INTO chaos_effects (tenant_id, key, job_id, attempt, worker, deduped)
					VALUES ($1, $2, $3, $4, $5, $6)`, j.TenantID, p.Key, j.ID, j.Attempt, j.WorkerID, tag.RowsAffected() == 0)
				return err
			})
			if err == nil || ctx.Err() != nil {
				return err
			}
			if err := clock.Sleep(ctx, 200*time.Millisecond); err != nil {
				return errors.Join(err, ctx.Err())
			}
		}
	}
}
