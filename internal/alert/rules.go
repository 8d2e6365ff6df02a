package alert

import (
	"context"
	"sort"
	"strings"
	"time"
)

// Reader is what rules read, inside the evaluation's transaction.
type Reader interface {
	DeadSince(ctx context.Context, since time.Time) (int64, error)
	FinishedSince(ctx context.Context, since time.Time) (int64, error)
	DueWaiting(ctx context.Context, now time.Time, cap int) (int64, error)
	ExpiredSince(ctx context.Context, since time.Time) (int64, error)
	PrincipalWindows(ctx context.Context, recentSince, baseSince time.Time, minRecent int64) ([]PrincipalWindow, error)
	MissingActorSince(ctx context.Context, since time.Time) (int64, error)
	WorkersSince(ctx context.Context, since time.Time) ([]WorkerWindow, error)
	// AutoPausedKinds are the kinds the failure-rate guard paused and no
	// one has resumed yet.
	AutoPausedKinds(ctx context.Context) ([]string, error)
}

// PrincipalWindow is one principal's enqueues now and in its baseline.
type PrincipalWindow struct {
	TenantID, Principal int64
	Recent, Baseline    int64
}

// WorkerWindow is one worker's attempts and failures over a window.
type WorkerWindow struct {
	WorkerID           string
	Attempts, Failures int64
}

// Sources are figures that come from other parts of Jejak.
type Sources struct {
	// OutboxLag is the age of the oldest unpublished outbox message;
	// nil = no outbox wired (the rule reads 0).
	OutboxLag func(ctx context.Context) (time.Duration, error)
}

// The windows the rules look at.
const (
	window         = 10 * time.Minute
	baselineWindow = 24 * time.Hour
)

// The rule names (stable: stored, exported as metric labels, and used by
// deploy/prometheus/jejak-rules.yml).
const (
	RuleDeadLetters     = "dead_letters_growing"
	RuleOutboxLag       = "outbox_lag"
	RuleQueueStalled    = "queue_stalled"
	RuleExpirySpike     = "expiry_spike"
	RulePrincipalSpike  = "principal_enqueue_spike"
	RuleMissingMetadata = "jobs_missing_metadata"
	RuleWorkerFailing   = "worker_failing"
	RuleKindAutoPaused  = "kind_auto_paused"
)

// DefaultRules are Jejak's alert rules with their thresholds. It is one
// table of rules (name, text, threshold, a short Eval each) and stays one
// function however long the table grows: splitting it would scatter the
// rules a reader compares side by side.
func DefaultRules(src Sources) []Rule {
	return []Rule{
		{
			Name: RuleDeadLetters, Title: "Dead letters growing",
			Description: "Jobs that became dead letters in the last 10 minutes.",
			Runbook: "Open /admin/dead, group by kind and error: a bad deploy or a failing dependency shows as one kind " +
				"with one error. Fix the cause, then retry the dead letters in bulk; discard only with a reason.",
			Threshold: 2, For: time.Minute,
			Eval: func(ctx context.Context, q Reader, now time.Time) (float64, string, error) {
				n, err := q.DeadSince(ctx, now.Add(-window).Truncate(time.Minute))
				return float64(n), summary(sumDead, n), err
			},
		},
		{
			Name: RuleOutboxLag, Title: "Outbox lag over 2 minutes",
			Description: "Age of the oldest outbox message not yet published, in seconds.",
			Runbook: "Check /admin/outbox and `web outbox status`: is the broker (NATS) reachable, is the relay running on " +
				"the leader? Messages are kept, not lost; they go out once the relay catches up.",
			Threshold: 120, For: time.Minute,
			Eval: func(ctx context.Context, _ Reader, _ time.Time) (float64, string, error) {
				if src.OutboxLag == nil {
					return 0, summary(sumNoOutbox), nil
				}
				d, err := src.OutboxLag(ctx)
				return d.Seconds(), summary(sumOutboxLag, d.Round(time.Second)), err
			},
		},
		{
			Name: RuleQueueStalled, Title: "Queue stalled",
			Description: "Due pending jobs (up to 1000) while no attempt finished in the last 5 minutes.",
			Runbook: "Check /admin workers: are any heartbeating? Are all workers stuck in long handlers (running jobs " +
				"with old start times)? Restart stuck replicas; leases return their jobs to the queue.",
			Threshold: 0, For: 5 * time.Minute,
			Eval: func(ctx context.Context, q Reader, now time.Time) (float64, string, error) {
				due, err := q.DueWaiting(ctx, now, 1000)
				if err != nil || due == 0 {
					return 0, summary(sumNoneDue), err
				}
				done, err := q.FinishedSince(ctx, now.Add(-5*time.Minute).Truncate(time.Minute))
				if err != nil {
					return 0, "", err
				}
				if done > 0 {
					return 0, summary(sumDueFlowing, due, done), nil
				}
				return float64(due), summary(sumDueStalled, due), nil
			},
		},
		{
			Name: RuleExpirySpike, Title: "Expiry spike",
			Description: "Jobs that expired before they could run, in the last 10 minutes.",
			Runbook: "Jobs wait longer than their expiry allows: the queue is behind (see queue_stalled and the oldest " +
				"pending age) or expiries are set too short for the load. Add workers or fix the backlog's cause.",
			Threshold: 10, For: 0,
			Eval: func(ctx context.Context, q Reader, now time.Time) (float64, string, error) {
				n, err := q.ExpiredSince(ctx, now.Add(-window))
				return float64(n), summary(sumExpired, n), err
			},
		},
		{
			Name: RulePrincipalSpike, Title: "One principal enqueuing far above its own normal",
			Description: "Highest ratio, over principals (tenant and requesting user) with at least 100 enqueues in the " +
				"last 10 minutes, of those enqueues to the principal's own 10-minute average over the day before.",
			Runbook: "Find the principal in the summary; open the tenant's audit trail filtered by that user. A runaway " +
				"script or a compromised account shows as a burst of one kind: disable the member or pause the tenant.",
			Threshold: 10, For: 2 * time.Minute,
			Eval: func(ctx context.Context, q Reader, now time.Time) (float64, string, error) {
				recentSince := now.Add(-window).Truncate(time.Minute)
				ws, err := q.PrincipalWindows(ctx, recentSince, recentSince.Add(-baselineWindow), 100)
				if err != nil || len(ws) == 0 {
					return 0, summary(sumNoPrincipal), err
				}
				var worst PrincipalWindow
				best := -1.0
				for _, w := range ws {
					// Average per 10-minute slot over the baseline day; a new
					// principal's baseline counts as one job per slot.
					avg := max(float64(w.Baseline)/float64(baselineWindow/window), 1)
					if r := float64(w.Recent) / avg; r > best {
						best, worst = r, w
					}
				}
				return best, summary(sumPrincipal,
					worst.Principal, worst.TenantID, worst.Recent, best), nil
			},
		},
		{
			Name: RuleMissingMetadata, Title: "Jobs missing metadata",
			Description: "Jobs enqueued without a requesting user in the last 10 minutes.",
			Runbook: "Every job should say who asked for it (S1). Find the kind in jejak_jobs_missing_metadata_total " +
				"and fix the enqueuing code to pass RequestedBy and the request's context (for its trace).",
			Threshold: 50, For: 5 * time.Minute,
			Eval: func(ctx context.Context, q Reader, now time.Time) (float64, string, error) {
				n, err := q.MissingActorSince(ctx, now.Add(-window).Truncate(time.Minute))
				return float64(n), summary(sumMissing, n), err
			},
		},
		{
			Name: RuleWorkerFailing, Title: "One worker failing far more than its peers",
			Description: "Highest ratio of a worker's failure rate over the last 10 minutes to the median failure rate " +
				"of its peers (workers with at least 20 attempts; the worker with at least 10 failures).",
			Runbook: "The summary names the worker: a replica with a bad network path, full disk, wrong config or " +
				"stale deploy. Drain it (stop it; its jobs return to the queue) and compare its config with a healthy peer.",
			Threshold: 3, For: 5 * time.Minute,
			Eval: func(ctx context.Context, q Reader, now time.Time) (float64, string, error) {
				ws, err := q.WorkersSince(ctx, now.Add(-window).Truncate(time.Minute))
				if err != nil {
					return 0, "", err
				}
				v, summary := workerOutlier(ws)
				return v, summary, nil
			},
		},
		{
			Name: RuleKindAutoPaused, Title: "Kind paused automatically",
			Description: "Kinds the failure-rate guard paused (half or more of at least 20 attempts failed in 5 minutes) " +
				"and no one has resumed.",
			Runbook: "Its jobs wait, none are lost. Open /admin/dead and the kind's recent failures: fix the cause " +
				"(a failing dependency, a bad deploy), then resume the kind on /admin with a reason; the alert resolves.",
			// The pause row is the state: it fires on the pass after the
			// guard pauses and resolves once the kind is resumed, whichever
			// replica did either.
			Threshold: 0, For: 0,
			Eval: func(ctx context.Context, q Reader, _ time.Time) (float64, string, error) {
				kinds, err := q.AutoPausedKinds(ctx)
				if err != nil || len(kinds) == 0 {
					return 0, summary(sumNoPaused), err
				}
				return float64(len(kinds)), summary(sumPaused, strings.Join(kinds, ", ")), nil
			},
		},
	}
}

// workerOutlier compares each worker's failure rate with the median of
// the others'.
func workerOutlier(ws []WorkerWindow) (float64, string) {
	var busy []WorkerWindow
	for _, w := range ws {
		if w.Attempts >= 20 {
			busy = append(busy, w)
		}
	}
	if len(busy) < 2 {
		return 0, summary(sumFewWorkers)
	}
	rate := func(w WorkerWindow) float64 { return float64(w.Failures) / float64(w.Attempts) }
	best, name := 0.0, ""
	for i, w := range busy {
		if w.Failures < 10 {
			continue
		}
		var peers []float64
		for j, p := range busy {
			if j != i {
				peers = append(peers, rate(p))
			}
		}
		sort.Float64s(peers)
		med := peers[len(peers)/2]
		if len(peers)%2 == 0 {
			med = (peers[len(peers)/2-1] + peers[len(peers)/2]) / 2
		}
		// A floor of 1% keeps a worker failing 20% among perfect peers finite.
		if r := rate(w) / max(med, 0.01); r > best {
			best, name = r, summary(sumWorker, w.WorkerID, rate(w)*100, med*100)
		}
	}
	if name == "" {
		return 0, summary(sumNoWorker)
	}
	return best, name
}
