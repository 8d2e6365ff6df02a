package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// JobStage is a step in a sensitive job's life (and the operator actions
// on dead letters): a job that acts on a tenant's behalf leaves its story
// in that tenant's trail.
type JobStage string

// Job lifecycle stages; each is recorded as action "job.<stage>".
const (
	JobQueued       JobStage = "queued"
	JobClaimed      JobStage = "claimed"
	JobStarted      JobStage = "started"
	JobSucceeded    JobStage = "succeeded"
	JobFailed       JobStage = "failed"
	JobRetried      JobStage = "retried"
	JobDeadLettered JobStage = "dead_lettered"
	JobRejected     JobStage = "rejected" // expired, approval revoked, policy
	JobSkipped      JobStage = "skipped"  // idempotent replay
	JobDelayed      JobStage = "delayed"  // resource lock busy
	JobReplayed     JobStage = "replayed" // by an operator, with a reason
	JobRescued      JobStage = "rescued"  // its worker vanished; the lease ran out
)

// JobDiscarded is a dead letter cancelled by an operator, with a reason.
const JobDiscarded JobStage = "discarded"

// How an operator's replay ended, recorded by the engine under the job's
// trace (the replayed event's): the job succeeded, or it died again (the
// detail carries the error and its class).
const (
	JobReplaySucceeded JobStage = "replay_succeeded"
	JobReplayFailed    JobStage = "replay_failed"
)

var jobStages = map[JobStage]bool{
	JobQueued: true, JobClaimed: true, JobStarted: true, JobSucceeded: true, JobFailed: true,
	JobRetried: true, JobDeadLettered: true, JobRejected: true, JobSkipped: true, JobDelayed: true,
	JobReplayed: true, JobDiscarded: true, JobRescued: true,
	JobReplaySucceeded: true, JobReplayFailed: true,
}

// JobEvent is one lifecycle step of a job, as the engine reports it.
type JobEvent struct {
	TenantID int64
	JobID    int64
	Kind     string // the job's kind, e.g. "user.disable-access"
	Stage    JobStage
	WorkerID string // "" before a worker holds the job
	Attempt  int    // 0 before the first claim
	TraceID  string
	// Actor is who caused the step: ActorSystem for the engine itself,
	// ActorUser for the requester at enqueue, ActorStaff for an operator's
	// replay. ActorID is nil for ActorSystem.
	ActorKind ActorKind
	ActorID   *int64
	// Reason explains rejections, failures, skips, delays and replays
	// ("expired", "approval_revoked", "lock_busy", an operator's words).
	Reason string
	// Detail holds more keys (a JSON object, may be nil); the keys above
	// win over keys of the same name.
	Detail json.RawMessage
}

// RecordJobEvent records a job lifecycle step as action "job.<stage>" on
// entity "job" with the job id, in the engine's transaction (the job's
// state change and its audit event commit together). The detail carries
// kind, stage, worker_id, attempt and reason.
func (r *Recorder) RecordJobEvent(ctx context.Context, tx pgx.Tx, e JobEvent) error {
	if !jobStages[e.Stage] {
		return fmt.Errorf("%w: unknown job stage %q", ErrInvalid, e.Stage)
	}
	if e.JobID <= 0 {
		return fmt.Errorf("%w: job id must be positive", ErrInvalid)
	}
	// RawMessage values keep the caller's numbers exact.
	detail := map[string]json.RawMessage{}
	if e.Detail != nil {
		extra, err := validDetail(e.Detail)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(extra, &detail); err != nil {
			return fmt.Errorf("%w: job event detail: %v", ErrInvalid, err)
		}
	}
	put := func(k string, v any) {
		b, _ := json.Marshal(v) // strings and ints always encode
		detail[k] = b
	}
	put("kind", e.Kind)
	put("stage", string(e.Stage))
	put("attempt", e.Attempt)
	if e.WorkerID != "" {
		put("worker_id", e.WorkerID)
	}
	if e.Reason != "" {
		put("reason", e.Reason)
	}
	raw, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encode job event detail: %w", err)
	}
	kind := e.ActorKind
	if kind == "" {
		kind = ActorSystem
	}
	jobID := e.JobID
	return r.Append(ctx, tx, Event{
		TenantID:  e.TenantID,
		ActorKind: kind,
		ActorID:   e.ActorID,
		Action:    "job." + string(e.Stage),
		Entity:    "job",
		EntityID:  strconv.FormatInt(e.JobID, 10),
		Detail:    raw,
		TraceID:   e.TraceID,
		JobID:     &jobID,
	})
}
