package job

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
)

// Config configures an Engine. Zero values take the defaults noted.
type Config struct {
	// Pool is the cross-tenant pool (database.OpenSystem, role jejak_system)
	// the engine claims, completes and maintains jobs with.
	Pool *pgxpool.Pool
	// Clock is the engine's only source of time; nil = clock.Database{}
	// (every reading is the database's now()).
	Clock clock.Clock
	// Workers is the number of handler goroutines; 0 = enqueue-only replica.
	Workers int
	// WorkerID names this engine in job rows and job_workers;
	// "" = hostname-pid-random.
	WorkerID string
	// Queues this engine works; nil = {"default"}.
	Queues []string
	// BatchSize caps one claim; 0 = max(Workers, 100) capped at 1000.
	BatchSize int
	// PollInterval is the fallback wake-up when no NOTIFY arrives; 0 = 1s.
	PollInterval time.Duration
	// LeaseDuration is how long a claim holds a job without renewal before
	// rescue may hand it to another worker: after a replica dies, its jobs
	// run elsewhere within about LeaseDuration + HeartbeatInterval.
	// 0 = 15s (JEJAK_LEASE).
	LeaseDuration time.Duration
	// HeartbeatInterval refreshes job_workers and renews the lease of every
	// job this engine holds; the maintenance leader rescues expired leases
	// as often. 0 = min(5s, LeaseDuration/3) (JEJAK_HEARTBEAT).
	HeartbeatInterval time.Duration
	// DisableTenantFairness turns the fair claim (equal share of each batch
	// per tenant with due work, round robin) into plain priority/due-time
	// order across tenants. Fairness is on by default, so one tenant's
	// burst cannot starve the others.
	DisableTenantFairness bool
	// PerTenantBatch is the minimum share of a batch each tenant with due
	// work may take; 0 = the equal share ceil(batch / tenants).
	PerTenantBatch int
	// TenantConcurrency caps running jobs per tenant and queue across all
	// replicas; 0 = no cap. The cap is soft: concurrent claimers may
	// overshoot it by at most one batch share.
	TenantConcurrency int
	// Backoff is the delay before retry n+1 after failed attempt n;
	// nil = DefaultBackoff: 2^n minutes plus up to 10% jitter (2 min, then 4).
	Backoff func(attempt int) time.Duration
	// Retention prunes succeeded and cancelled jobs finished longer ago
	// than this; 0 = 7 days; negative = never.
	Retention time.Duration
	// DeadRetention prunes dead letters; 0 = never (they wait for triage).
	DeadRetention time.Duration
	// ScheduledPrune leaves the retention prune to the scheduler's
	// job.retention schedule (PruneFinished, once per period across
	// replicas, its runs shown on /admin) instead of every maintenance pass.
	ScheduledPrune bool
	// MaintenanceInterval is how often the leader prunes (rescue of
	// expired leases and leader election run every HeartbeatInterval, or
	// this interval when shorter); 0 = 30s.
	MaintenanceInterval time.Duration
	// Logger receives operational logs; nil = slog.Default().
	Logger *slog.Logger
	// Observer receives enqueue, attempt and rescue events for metrics;
	// nil = none.
	Observer Observer
	// NoMaintenance leaves leader election, rescue, pruning and the
	// maintenance hooks to another engine of the process (rescue and
	// pruning cover every queue): for an engine that only works one
	// queue with workers of its own, such as webhook deliveries.
	NoMaintenance bool
}

// Engine enqueues, claims, runs and maintains jobs.
type Engine struct {
	cfg   Config
	pool  *pgxpool.Pool
	clock clock.Clock
	log   *slog.Logger

	mu    sync.RWMutex
	kinds map[string]kindEntry

	cursorMu sync.Mutex
	cursors  map[string]int64 // round-robin tenant cursor per queue
	busy     map[string]bool  // the queue's last claim filled its batch
	deep     map[string]bool  // its last walk found every tenant with a deep backlog (deepShare)
	slot     slot             // the tenants this worker claims first (affinity.go)
	queueRR  int

	stats engineStats

	pauses pauseCache // paused kinds and queues, refreshed about once a second

	hooksMu sync.Mutex
	hooks   []func(context.Context) error // run by the maintenance leader

	// warmFor and warmPoll override the producer Sleeper's defaults
	// (tests).
	warmFor, warmPoll time.Duration

	run     *runState // non-nil between Start and Stop
	runMu   sync.Mutex
	leader  atomic.Bool
	stopped atomic.Bool
}

type kindEntry struct {
	h    Handler
	opts KindOptions
}

// DefaultLease is the claim lease when Config.LeaseDuration is zero.
const DefaultLease = 15 * time.Second

// DefaultMaxAttempts is a kind's attempt budget unless it registers
// another: a transient outage usually passes within two retries (2 and 4
// minutes with the default backoff), and a failure that outlives them
// wants a person.
const DefaultMaxAttempts = 3

// New validates cfg, fills defaults and returns an engine that is not yet
// running (Start runs it). Enqueue works without Start.
func New(cfg Config) (*Engine, error) {
	if cfg.Pool == nil {
		return nil, errors.New("job engine: Config.Pool is required")
	}
	if cfg.Workers < 0 {
		return nil, errors.New("job engine: Workers must not be negative")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Database{}
	}
	if cfg.WorkerID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.WorkerID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if len(cfg.Queues) == 0 {
		cfg.Queues = []string{"default"}
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = min(max(cfg.Workers, 100), 1000)
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLease
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = min(5*time.Second, cfg.LeaseDuration/3)
	}
	if cfg.HeartbeatInterval >= cfg.LeaseDuration {
		return nil, errors.New("job engine: HeartbeatInterval must be shorter than LeaseDuration")
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Retention == 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.MaintenanceInterval <= 0 {
		cfg.MaintenanceInterval = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Engine{
		cfg:     cfg,
		pool:    cfg.Pool,
		clock:   cfg.Clock,
		log:     cfg.Logger.With("component", "job", "worker_id", cfg.WorkerID),
		kinds:   map[string]kindEntry{},
		cursors: map[string]int64{},
		busy:    map[string]bool{},
		deep:    map[string]bool{},
	}, nil
}

// DefaultBackoff waits 2^attempt minutes after failed attempt n, plus up to
// 10% jitter so retries of a burst of failures do not arrive together.
func DefaultBackoff(attempt int) time.Duration {
	base := time.Duration(math.Pow(2, float64(min(attempt, 20)))) * time.Minute
	return base + time.Duration(mrand.Int64N(int64(base/10)+1))
}

// WorkerID is the identity this engine stamps on the jobs it claims.
func (e *Engine) WorkerID() string { return e.cfg.WorkerID }

// Register installs the handler of a kind. Registering on an enqueue-only
// replica is still useful: its options set the kind's default max attempts.
func (e *Engine) Register(kind string, h Handler, opts KindOptions) {
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	e.mu.Lock()
	e.kinds[kind] = kindEntry{h: h, opts: opts}
	e.mu.Unlock()
}

// KindOptions reports a registered kind's options (ok false if unknown).
func (e *Engine) KindOptions(kind string) (KindOptions, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	k, ok := e.kinds[kind]
	return k.opts, ok
}

func (e *Engine) handler(kind string) (kindEntry, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	k, ok := e.kinds[kind]
	return k, ok
}

// Querier is what Enqueue needs: normally the caller's pgx.Tx, so the job
// exists if and only if the caller's transaction commits.
type Querier = database.Querier

// Enqueue writes one job inside the caller's transaction. With an
// idempotency key already used for the same tenant and kind it writes
// nothing and returns the existing job with Existing set.
func (e *Engine) Enqueue(ctx context.Context, tx Querier, p EnqueueParams) (Enqueued, error) {
	if err := e.checkAuditable(tx, []EnqueueParams{p}); err != nil {
		return Enqueued{}, err
	}
	ids, existing, err := e.enqueue(ctx, tx, []EnqueueParams{p})
	if err != nil {
		return Enqueued{}, err
	}
	if err := e.stampControls(ctx, tx, []EnqueueParams{p}, ids, existing); err != nil {
		return Enqueued{}, err
	}
	if err := e.recordQueued(ctx, tx, []EnqueueParams{p}, ids, existing); err != nil {
		return Enqueued{}, err
	}
	return Enqueued{ID: ids[0], Existing: existing[0]}, nil
}

// EnqueueMany writes many jobs in one statement (unnest arrays), returning
// their ids in input order; an idempotency key that already exists yields
// the existing job's id. Nothing is written if any payload is invalid.
func (e *Engine) EnqueueMany(ctx context.Context, tx Querier, ps []EnqueueParams) ([]int64, error) {
	if err := e.checkAuditable(tx, ps); err != nil {
		return nil, err
	}
	ids, existing, err := e.enqueue(ctx, tx, ps)
	if err != nil {
		return nil, err
	}
	if err := e.stampControls(ctx, tx, ps, ids, existing); err != nil {
		return nil, err
	}
	return ids, e.recordQueued(ctx, tx, ps, ids, existing)
}

// maxInsertBatch keeps one statement's arrays to a size PostgreSQL and pgx
// handle comfortably.
const maxInsertBatch = 10000

func (e *Engine) enqueue(ctx context.Context, tx Querier, ps []EnqueueParams) ([]int64, []bool, error) {
	if len(ps) == 0 {
		return nil, nil, nil
	}
	defer e.enqueueSpan(ctx, ps).End(nil)
	resolved := make([]EnqueueParams, len(ps))
	for i, p := range ps {
		if err := e.resolve(&p); err != nil {
			return nil, nil, err
		}
		traceFromContext(ctx, &p)
		resolved[i] = p
	}
	now := e.clock.Now()
	ids := make([]int64, len(ps))
	existing := make([]bool, len(ps))
	for start := 0; start < len(resolved); start += maxInsertBatch {
		chunk := resolved[start:min(start+maxInsertBatch, len(resolved))]
		rows, err := storeInsert(ctx, tx, now, chunk)
		if err != nil {
			return nil, nil, fmt.Errorf("enqueue %d job(s): %w", len(chunk), err)
		}
		// Inserted rows come back in input order; inputs missing from
		// them hit an idempotency key that already exists.
		sort.Slice(rows, func(a, b int) bool { return rows[a].ID < rows[b].ID })
		r := 0
		for i, p := range chunk {
			if r < len(rows) && rows[r].TenantID == p.TenantID && rows[r].Kind == p.Kind &&
				rows[r].IdempotencyKey == p.IdempotencyKey {
				ids[start+i] = rows[r].ID
				r++
				continue
			}
			if p.IdempotencyKey == "" {
				return nil, nil, fmt.Errorf("enqueue: inserted rows do not match input %d", start+i)
			}
			id, err := storeGetByIdempotencyKey(ctx, tx, p.TenantID, p.Kind, p.IdempotencyKey)
			if err != nil {
				return nil, nil, fmt.Errorf("enqueue: look up job with idempotency key %q: %w", p.IdempotencyKey, err)
			}
			ids[start+i], existing[start+i] = id, true
		}
	}
	e.observeEnqueued(resolved, existing)
	database.WakeAfterCommit(tx, jobsChannel)
	return ids, existing, nil
}

// resolve validates p and fills its defaults.
func (e *Engine) resolve(p *EnqueueParams) error {
	if p.TenantID <= 0 {
		return fmt.Errorf("%w: tenant id must be positive", ErrInvalidJob)
	}
	if p.Kind == "" || len(p.Kind) > 100 {
		return fmt.Errorf("%w: kind must be 1–100 characters", ErrInvalidJob)
	}
	if len(p.Payload) == 0 || !json.Valid(p.Payload) {
		return fmt.Errorf("%w (kind %s): %.80q", ErrInvalidPayload, p.Kind, p.Payload)
	}
	if err := checkPayloadTenant(p.Payload, p.TenantID); err != nil {
		return err
	}
	if p.Queue == "" {
		p.Queue = "default"
	}
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
		if o, ok := e.KindOptions(p.Kind); ok {
			p.MaxAttempts = o.MaxAttempts
		}
	}
	return nil
}

// checkPayloadTenant refuses a payload whose own tenant_id (payloads carry
// their tenant so a handler can check it) names a different tenant than the
// job row.
func checkPayloadTenant(payload json.RawMessage, tenantID int64) error {
	if len(payload) == 0 || payload[0] != '{' {
		return nil
	}
	var v struct {
		TenantID *json.Number `json:"tenant_id"`
	}
	if err := json.Unmarshal(payload, &v); err != nil || v.TenantID == nil {
		return nil
	}
	if id, err := v.TenantID.Int64(); err != nil || id != tenantID {
		return fmt.Errorf("%w: payload tenant_id %s does not match job tenant %d", ErrInvalidPayload, v.TenantID.String(), tenantID)
	}
	return nil
}

// Claim takes up to n due jobs for workerID across the engine's queues,
// fairly across tenants, marking them running with a lease. The worker
// pool uses it; tests and tools may call it directly.
func (e *Engine) Claim(ctx context.Context, workerID string, n int) ([]*Job, error) {
	jobs, _, err := e.claim(ctx, workerID, n)
	return jobs, err
}

// claim is Claim, also reporting whether every queue was answered by the
// idle queue's claim (claim_small.sql) that fitted, or by a walk that left
// every tenant it served at its cap: then nothing else could be claimed
// when it ran, and the producer can wait for the next NOTIFY, completion
// flush or poll instead of claiming again at once.
func (e *Engine) claim(ctx context.Context, workerID string, n int) ([]*Job, bool, error) {
	if n <= 0 {
		return nil, false, nil
	}
	now := e.clock.Now()
	queues := e.cfg.Queues
	e.cursorMu.Lock()
	startQ := e.queueRR % len(queues)
	e.queueRR++
	e.cursorMu.Unlock()
	var out []*Job
	drained := true
	i := 0
	for ; i < len(queues) && len(out) < n; i++ {
		q := queues[(startQ+i)%len(queues)]
		if e.queuePaused(ctx, q) {
			continue
		}
		jobs, small, err := e.claimQueue(ctx, now, q, workerID, n-len(out))
		if err != nil {
			return out, false, err
		}
		drained = drained && small
		out = append(out, jobs...)
	}
	drained = drained && i == len(queues)
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].Priority != out[b].Priority {
			return out[a].Priority < out[b].Priority
		}
		if !out[a].AvailableAt.Equal(out[b].AvailableAt) {
			return out[a].AvailableAt.Before(out[b].AvailableAt)
		}
		return out[a].ID < out[b].ID
	})
	return out, drained, nil
}

// Tenant shares of a fair batch when the backlog is deep. Each tenant the
// walk visits costs the claim an index probe, and while a queue drains each
// probe steps over the entries its tenant's claimed jobs left behind (dead
// until vacuum). When every tenant the last walk visited filled a share of
// at least deepEntryShare, the claim visits only batch/deepShare tenants (a
// batch of 100: 4 tenants of 25 instead of 10 of 10), continuing the round
// robin after them: each tenant still gets an equal share, over a few
// consecutive batches rather than within one (about 10% less claim time
// per job at 10 tenants). The first tenant that does not fill its deep
// share (a small tenant the round robin reaches) ends it, and walks again
// visit every tenant in one batch. Many tenants per batch (more than about
// 12 at 100) make every share smaller than deepEntryShare: the mode never
// starts there.
const (
	deepEntryShare = 8
	deepShare      = 25
)

func (e *Engine) claimQueue(ctx context.Context, now *time.Time, queue, workerID string, n int) (jobs []*Job, small bool, err error) {
	perTenant := e.cfg.PerTenantBatch
	if e.cfg.DisableTenantFairness {
		perTenant = n
	}
	e.cursorMu.Lock()
	cursor := e.cursors[queue]
	idle := !e.busy[queue]
	deep := e.deep[queue] && !e.cfg.DisableTenantFairness
	own := e.slot.orAll()
	e.cursorMu.Unlock()
	if e.cfg.DisableTenantFairness {
		own = all // strict priority order across every tenant
	}
	// Read before taking a connection: a reload of the pauses takes one of
	// its own from the same pool.
	paused := e.pausedKinds(ctx)
	// Only the wait for a connection ends with ctx. When the pool is taken
	// (by handlers waiting to be cancelled, say) that wait is what stands
	// between Stop and its deadline; the claim statement itself is not cut
	// short: one that committed on the server but was cancelled in the
	// client would leave its jobs running until their lease expired.
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("claim jobs: acquire connection: %w", err)
	}
	defer conn.Release()
	ctx = context.WithoutCancel(ctx)
	args := claimArgs{
		now: now, queue: queue, workerID: workerID, batch: n, lease: e.cfg.LeaseDuration,
		maxTenants: n, perTenant: perTenant, maxShare: n,
		tenantConcurrency: e.cfg.TenantConcurrency, fair: !e.cfg.DisableTenantFairness,
		slot: own, pausedKinds: paused,
	}
	// After a short claim the queue was drained, so the next one (woken by
	// NOTIFY or the poll) most likely finds a handful of jobs: when the
	// whole due set fits in the batch, claim_small.sql takes all of it
	// without the per-tenant walk (a probe per tenant), which is what an idle
	// worker's latency is made of. Everyone gets everything, so that is
	// fair; the per-tenant cap needs the walk's running counts.
	if idle && e.cfg.TenantConcurrency == 0 {
		jobs, fits, err := e.claimSmall(ctx, conn, args)
		if err != nil {
			return nil, false, err
		}
		if fits {
			return jobs, true, nil // at most n were due: the queue stays idle
		}
	}
	out, drained, err := e.claimWalk(ctx, conn, args, cursor, deep)
	if err != nil {
		return out, false, err
	}
	if drained && len(out) < n && own != all {
		// The worker's own tenants have nothing more due: it takes what
		// the others' have, one walk from the first tenant (the queue's
		// round robin is its own tenants').
		more, stealDrained, err := e.steal(ctx, conn, args, n-len(out))
		out, drained = append(out, more...), stealDrained
		if err != nil {
			return out, false, err
		}
	}
	e.cursorMu.Lock()
	e.busy[queue] = len(out) == n
	e.cursorMu.Unlock()
	return out, drained, nil
}

// claimSmall takes every due job of the queue when they all fit in the
// batch (fits), without the per-tenant walk.
func (e *Engine) claimSmall(ctx context.Context, conn *pgxpool.Conn, args claimArgs) (jobs []*Job, fits bool, err error) {
	began := time.Now() //nolint:forbidigo // duration measurement, not domain time
	jobs, fits, err = storeClaimSmall(ctx, conn, args)
	if err != nil {
		return nil, false, fmt.Errorf("claim jobs from queue %s: %w", args.queue, err)
	}
	if !fits {
		return nil, false, nil
	}
	// The round robin goes on from here as if the walk had served these
	// tenants: after the last of them when they filled the walk's tenant
	// budget (a batch of one that took tenant A's job leaves B first in
	// line), else from the start.
	next, seen := int64(0), map[int64]bool{}
	for _, j := range jobs {
		seen[j.TenantID] = true
		next = max(next, j.TenantID)
	}
	if len(seen) < args.maxTenants || !args.fair {
		next = 0
	}
	e.cursorMu.Lock()
	e.cursors[args.queue] = next
	e.cursorMu.Unlock()
	e.countClaim(len(jobs), began)
	e.stats.smallClaims.Add(1)
	return jobs, true, nil
}

// claimWalk claims up to args.batch jobs with the per-tenant walk, starting
// after tenant cursor. A pass falls short when a tenant has fewer due jobs
// than its share (or when the round-robin cursor started mid-way); another
// pass hands the rest of the batch to the tenants that still have work.
//
// drained reports that the walk saw every tenant with due work and took
// all it could (every due job, or as many as each tenant's cap left
// room for): claiming again at once would find nothing until more jobs
// come or jobs finish. Under a tenant cap the small claim is never used,
// so this is how an engine with a cap (the webhook deliveries') waits
// after a claim that emptied the queue instead of claiming again for
// nothing.
func (e *Engine) claimWalk(ctx context.Context, conn *pgxpool.Conn, args claimArgs, cursor int64, deep bool) (out []*Job, drained bool, err error) {
	n, perTenant := args.batch, args.perTenant
	for pass := 0; pass < 3 && len(out) < n; pass++ {
		began := time.Now() //nolint:forbidigo // duration measurement, not domain time
		args.batch, args.afterTenant = n-len(out), cursor
		if deep {
			// Just enough tenants for what is left of the batch. A walk
			// that starts mid-way and reaches the last tenant early gives
			// those it found no more than the deep share: the next pass
			// (or claim) goes on from the first, so the round robin serves
			// every tenant the same share in turn. A walk from the first
			// tenant that ends early has seen everyone with due work and
			// splits the batch between them.
			share := max(deepShare, perTenant)
			args.maxTenants, args.maxShare = (args.batch+share-1)/share, n
			if cursor != 0 {
				args.maxShare = share
			}
		}
		res, err := storeClaim(ctx, conn, args)
		if err != nil {
			return out, false, fmt.Errorf("claim jobs from queue %s: %w", args.queue, err)
		}
		e.countClaim(len(res.jobs), began)
		out = append(out, res.jobs...)
		next := e.moveCursor(args, res, pass == 0)
		// A walk from the start that visited every tenant with due work
		// and filled nobody's share saw everything that is due (or could
		// be taken under the tenants' caps): another pass, or a claim at
		// once, would find nothing, so the producer waits as after a
		// drained queue.
		if cursor == 0 && next == 0 && (len(res.jobs) == 0 || res.tenants < args.maxTenants && !res.fullQuota) {
			return out, true, nil
		}
		cursor = next
	}
	return out, false, nil
}

// steal claims up to n jobs of any tenant in one walk from the first,
// reporting whether it saw every tenant with due work and took all it could.
func (e *Engine) steal(ctx context.Context, conn *pgxpool.Conn, args claimArgs, n int) ([]*Job, bool, error) {
	began := time.Now() //nolint:forbidigo // duration measurement, not domain time
	args.slot, args.batch, args.afterTenant, args.maxTenants, args.maxShare = all, n, 0, n, n
	res, err := storeClaim(ctx, conn, args)
	if err != nil {
		return nil, false, fmt.Errorf("claim jobs from queue %s: %w", args.queue, err)
	}
	e.countClaim(len(res.jobs), began)
	e.stats.steals.Add(1)
	return res.jobs, len(res.jobs) == 0 || res.tenants < args.maxTenants && !res.fullQuota, nil
}

// moveCursor records where the queue's round robin goes on after a walk and
// returns it. When the walk was cut short by maxTenants, the next claim
// starts after the last tenant it visited (whether or not it gave anything:
// tenants whose due jobs are all of paused kinds must not hold the cursor
// back); otherwise from the start. Without fairness the claim always starts
// from the first tenants. The first pass of a claim also decides whether
// the queue's backlog is deep.
func (e *Engine) moveCursor(args claimArgs, res fairClaim, first bool) int64 {
	next := int64(0)
	if res.tenants >= args.maxTenants && args.fair {
		next = res.last
	}
	e.cursorMu.Lock()
	defer e.cursorMu.Unlock()
	e.cursors[args.queue] = next
	if first {
		e.deep[args.queue] = args.fair && res.deepShare >= deepEntryShare
	}
	return next
}

// countClaim adds one claim statement to the engine's statistics.
func (e *Engine) countClaim(jobs int, began time.Time) {
	e.stats.claims.Add(1)
	e.stats.claimed.Add(int64(jobs))
	e.stats.claimNanos.Add(int64(time.Since(began)))
}

// Complete marks a job the worker holds as succeeded; ErrNotHeld when the
// worker does not hold it (never claimed, already finished, rescued). It
// completes whichever attempt the worker holds now: code that ran a
// particular claim uses CompleteAttempt.
func (e *Engine) Complete(ctx context.Context, workerID string, id int64) error {
	t, err := storeGetHeld(ctx, e.pool, workerID, id)
	if err != nil {
		return fmt.Errorf("complete job %d: %w", id, err)
	}
	return e.complete(ctx, workerID, t)
}

// CompleteAttempt marks job id of tenantID succeeded only if workerID still
// holds that attempt of it (the claim token): a completion that arrives
// after the lease was lost and the job claimed again, by any worker, is
// refused with ErrNotHeld.
func (e *Engine) CompleteAttempt(ctx context.Context, workerID string, tenantID, id int64, attempt int) error {
	return e.complete(ctx, workerID, claimToken{tenantID, id, attempt})
}

func (e *Engine) complete(ctx context.Context, workerID string, t claimToken) error {
	id := t.id
	ok, err := storeComplete(ctx, e.pool, e.clock.Now(), workerID, t)
	if err != nil {
		return fmt.Errorf("complete job %d: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("complete job %d: %w", id, ErrNotHeld)
	}
	return nil
}

// Fail records a failed attempt of a job the worker holds and returns the
// job's new state: pending (retry after backoff) or dead. The class comes
// from the error (Permanent, Policy, else transient).
func (e *Engine) Fail(ctx context.Context, workerID string, id int64, cause error) (State, error) {
	t, err := storeGetHeld(ctx, e.pool, workerID, id)
	if err != nil {
		return "", fmt.Errorf("fail job %d: %w", id, err)
	}
	return e.fail(ctx, workerID, t, cause)
}

// FailAttempt is Fail fenced by the claim token (worker, attempt) of job
// id of tenantID.
func (e *Engine) FailAttempt(ctx context.Context, workerID string, tenantID, id int64, attempt int, cause error) (State, error) {
	return e.fail(ctx, workerID, claimToken{tenantID, id, attempt}, cause)
}

func (e *Engine) fail(ctx context.Context, workerID string, t claimToken, cause error) (State, error) {
	return e.failIn(ctx, e.pool, workerID, t, cause)
}

// failIn is fail through db: the pool, or a transaction that also carries
// the failure's audit events.
func (e *Engine) failIn(ctx context.Context, db Querier, workerID string, t claimToken, cause error) (State, error) {
	if cause == nil {
		cause = errors.New("unspecified failure")
	}
	e.stats.failures.Add(1)
	backoff := e.cfg.Backoff(t.attempt)
	if errors.Is(cause, errShutdown) {
		backoff = 0 // another replica may take it at once
	}
	st, err := storeFail(ctx, db, e.clock.Now(), workerID, t, ClassOf(cause), cause.Error(), backoff)
	if err != nil {
		return "", fmt.Errorf("fail job %d: %w", t.id, err)
	}
	if st == StateDead {
		e.observeCancelledDependents(ctx, db, []int64{t.id})
	}
	return st, nil
}

// rescue returns running jobs whose lease has expired (their worker
// crashed or lost the database) to pending, or dead when that was their
// last attempt. It reports how many jobs it rescued.
func (e *Engine) rescue(ctx context.Context, db Querier) (int, error) {
	if kinds := e.sensitiveKinds(); len(kinds) > 0 {
		return e.rescueAudited(ctx, kinds)
	}
	retried, dead, err := storeRescue(ctx, db, e.clock.Now())
	if err != nil {
		return 0, fmt.Errorf("rescue expired jobs: %w", err)
	}
	e.observeCancelledDependents(ctx, db, dead)
	if retried+len(dead) > 0 {
		e.observer().JobsRescued(retried + len(dead))
		e.log.Warn("rescued jobs with expired leases", "retried", retried, "dead", len(dead))
		if retried > 0 {
			_ = storeNotify(ctx, db)
		}
	}
	return retried + len(dead), nil
}

// PruneFinished runs the retention prune once on db (the scheduler's
// claiming transaction) and reports how many jobs it deleted.
func (e *Engine) PruneFinished(ctx context.Context, db Querier) (int64, error) {
	return e.prune(ctx, db)
}

// prune deletes finished jobs past retention (succeeded and cancelled after
// Retention, dead after DeadRetention when set) in bounded slices, and
// reports how many it deleted. The maintenance leader calls it.
func (e *Engine) prune(ctx context.Context, db Querier) (int64, error) {
	const slice = 5000
	var total int64
	sets := []struct {
		states []State
		age    time.Duration
	}{{[]State{StateSucceeded, StateCancelled}, e.cfg.Retention}, {[]State{StateDead}, e.cfg.DeadRetention}}
	for _, s := range sets {
		if s.age <= 0 {
			continue
		}
		for {
			n, err := storeDeleteFinished(ctx, db, e.clock.Now(), s.states, s.age, slice)
			if err != nil {
				return total, fmt.Errorf("prune finished jobs: %w", err)
			}
			total += n
			if n < slice {
				break
			}
		}
	}
	return total, nil
}

type engineStats struct {
	claims, claimed, claimNanos    atomic.Int64
	smallClaims, steals            atomic.Int64
	flushes, completed, flushNanos atomic.Int64
	failures                       atomic.Int64
	notifications                  atomic.Int64
}

// Stats are cumulative counters of this engine's database work, for
// metrics and benchmarks.
type Stats struct {
	Claims    int64         // claim statements run
	Claimed   int64         // jobs they returned
	ClaimTime time.Duration // total time in claim statements
	// SmallClaims counts claims (among Claims) that found at most a batch
	// due and took it without the per-tenant walk (claim_small.sql).
	SmallClaims int64
	// Steals counts claims (among Claims) of other workers' tenants,
	// made when this worker's own had nothing due (affinity.go).
	Steals    int64
	Flushes   int64         // batched completion statements run
	Completed int64         // jobs they marked succeeded
	FlushTime time.Duration // total time in completion statements
	Failures  int64         // failed attempts recorded
	// Notifications counts what the listener handed the claim loop: each
	// NOTIFY on the jobs channel, and the wake-up after each LISTEN.
	Notifications int64
}

// Stats returns the engine's counters so far.
func (e *Engine) Stats() Stats {
	return Stats{
		Claims: e.stats.claims.Load(), Claimed: e.stats.claimed.Load(),
		ClaimTime: time.Duration(e.stats.claimNanos.Load()), SmallClaims: e.stats.smallClaims.Load(),
		Steals: e.stats.steals.Load(), Flushes: e.stats.flushes.Load(), Completed: e.stats.completed.Load(),
		FlushTime: time.Duration(e.stats.flushNanos.Load()),
		Failures:  e.stats.failures.Load(), Notifications: e.stats.notifications.Load(),
	}
}
