package outbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"

	"github.com/jejakhq/jejak/internal/clip"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/tracing"
)

// RelayConfig configures a Relay. Zero values take the defaults noted.
type RelayConfig struct {
	// Pool is the cross-tenant pool (role jejak_system). Required.
	Pool *pgxpool.Pool
	// Sink receives claimed messages; nil = NoSink (delivered to nothing).
	Sink Sink
	// Clock is the relay's only source of time; nil = the database's now().
	Clock clock.Clock
	// WorkerID names this relay in reserved_by; "" = hostname-pid-random.
	WorkerID string
	// BatchSize caps one claim; 0 = 1000. Each loop can have two batches
	// out, so the JetStream client must allow Concurrency × 2 × BatchSize
	// pending asynchronous publishes (natsbus allows 8192).
	BatchSize int
	// Concurrency is how many claim loops run (each claims, publishes and
	// settles its own batches, claiming the next while the previous one's
	// acknowledgements are awaited); 0 = 2.
	Concurrency int
	// PollInterval is the fallback wake-up when no NOTIFY arrives; 0 = 1s.
	PollInterval time.Duration
	// Linger is how long a loop waits, after a claim that took everything
	// claimable, before it claims again: the messages committed meanwhile
	// go out in one claim instead of a claim each. At a few hundred
	// messages a second, claiming again at once took a handful of messages
	// a time, and the claims were among the largest costs on the database.
	// A loop that had to wait for its previous batch's publish does not
	// linger: messages gathered while it waited. 0 = DefaultLinger,
	// negative = none.
	Linger time.Duration
	// MaxAttempts is how many publishes a message gets before it is
	// failed; 0 = 5.
	MaxAttempts int
	// Backoff is the delay after failed attempt n; nil = DefaultBackoff.
	Backoff func(attempt int) time.Duration
	// PublishTimeout bounds one batch's publish; 0 = 10s. It must stay far
	// below ReclaimAfter, so a live relay is never reclaimed.
	PublishTimeout time.Duration
	// ReclaimAfter returns reservations older than this to pending; 0 =
	// 10 minutes. The JetStream duplicate window must be longer.
	ReclaimAfter time.Duration
	// MaintenanceInterval is how often reclaim (every relay) and pruning
	// (the leader) run; 0 = 30s.
	MaintenanceInterval time.Duration
	// Retention prunes delivered messages older than this; 0 = 24h,
	// negative = never.
	Retention time.Duration
	// ScheduledPrune leaves pruning delivered messages to the scheduler's
	// outbox.retention schedule (PruneDelivered) instead of every pass.
	ScheduledPrune bool
	// ElectEvery is how often a relay on standby tries for the relay lease
	// (and the holder checks that its session still holds it); 0 = 1s.
	ElectEvery time.Duration
	// Unleased claims whether or not this relay holds the relay lease:
	// for tests of relays claiming side by side, which is what a handover
	// of the lease allows for a moment.
	Unleased bool
	// IsLeader reports whether this replica holds maintenance leadership
	// (the job engine's election); pruning runs only there. nil = never.
	IsLeader func() bool
	// Logger receives operational logs; nil = slog.Default().
	Logger *slog.Logger
	// OnPublished, when set, is told after each batch how many messages
	// the sink accepted ("ok") and refused ("error"), for metrics.
	OnPublished func(result string, n int)
}

// DefaultLinger is RelayConfig.Linger's default: a message waits at most
// this much longer for its claim.
const DefaultLinger = 20 * time.Millisecond

// DefaultMaxAttempts is the default retry budget.
const DefaultMaxAttempts = 5

// DefaultReclaimAfter is how long a reservation may last.
const DefaultReclaimAfter = 10 * time.Minute

// DefaultBackoff waits 5 s, 20 s, 80 s, 320 s... after failed attempt n
// (capped at 10 minutes): the five default attempts span about seven
// minutes, so a broker outage of a few minutes fails no message.
func DefaultBackoff(attempt int) time.Duration {
	return min(5*time.Second<<(2*min(max(attempt-1, 0), 10)), 10*time.Minute)
}

// Relay moves committed outbox messages to its Sink.
type Relay struct {
	cfg  RelayConfig
	clk  clock.Clock
	log  *slog.Logger
	sink Sink

	mu       sync.Mutex
	wakes    []chan struct{}
	sleepers []*database.Sleeper // wakes[i]'s loop

	lease lease

	// afterPublish, when set (tests), runs after a batch was published;
	// returning true abandons the batch unsettled, as a crash would.
	afterPublish func([]Envelope) bool
	// warmFor and warmPoll override the loops' Sleeper defaults (tests).
	warmFor, warmPoll time.Duration
}

// outboxChannel is the NOTIFY channel of the outbox insert trigger.
const outboxChannel = "jejak_outbox"

// errAbandoned is returned by RunOnce when a test hook abandoned a batch.
var errAbandoned = errors.New("batch abandoned after publish")

// NewRelay validates cfg and fills defaults.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	if cfg.Pool == nil {
		return nil, errors.New("outbox relay: RelayConfig.Pool is required")
	}
	if cfg.Sink == nil {
		cfg.Sink = NoSink{}
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
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 2
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.Linger == 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.ElectEvery <= 0 {
		cfg.ElectEvery = time.Second
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = 10 * time.Second
	}
	if cfg.ReclaimAfter <= 0 {
		cfg.ReclaimAfter = DefaultReclaimAfter
	}
	if cfg.PublishTimeout*2 >= cfg.ReclaimAfter {
		return nil, errors.New("outbox relay: PublishTimeout must be well below ReclaimAfter")
	}
	if cfg.MaintenanceInterval <= 0 {
		cfg.MaintenanceInterval = 30 * time.Second
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Relay{cfg: cfg, clk: cfg.Clock, sink: cfg.Sink,
		log:   cfg.Logger.With("component", "outbox", "worker_id", cfg.WorkerID),
		lease: lease{changed: make(chan struct{})}}, nil
}

// relayLockKey is the session-level advisory lock of the relay lease (per
// database; the single-int form, beside the maintenance leader's 727275).
//
// One relay claims at a time in the whole cluster: claims take turns
// anyway (outbox_claimable's lock), so relays on more replicas added no
// claims a second, only cost. Each claim took what had committed since
// the one before, whoever made it, so with four replicas' eight loops the
// claims were smaller and more of them, each paying the walk's fixed cost,
// and the loops waiting for their turn were sessions the database had to
// schedule (docs/benchmarks.md, 2026-12-07 04:05). The other replicas
// wait on standby, and the first of them to try after the holder's
// session ends takes over, within ElectEvery. The lease is not
// what keeps delivery correct (claims, order and settles hold with relays
// side by side, as during a handover), only what keeps it cheap.
const relayLockKey = 727280

// lease is whether this relay holds the relay lease, with a channel closed
// at each change for the loops waiting on it.
type lease struct {
	mu      sync.Mutex
	held    bool
	changed chan struct{}
}

func (l *lease) set(held bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held != held {
		l.held = held
		close(l.changed)
		l.changed = make(chan struct{})
	}
}

func (l *lease) get() (bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held, l.changed
}

// elect runs the relay lease's election until ctx ends, then gives the
// lease up (its session closes) for a standby relay to take.
func (r *Relay) elect(ctx context.Context) {
	if r.cfg.Unleased {
		r.lease.set(true)
		return
	}
	// The holder's session is pinged every ElectEvery: cut off without
	// its connection closing, it is ended by the server after ten of them.
	e := &database.Election{Pool: r.cfg.Pool, Key: relayLockKey, Silence: 10 * r.cfg.ElectEvery,
		OnChange: func(held bool) {
			r.lease.set(held)
			if held {
				r.log.Info("outbox relay lease taken: this replica relays")
			} else {
				r.log.Info("outbox relay lease given up")
			}
		}}
	defer e.Drop()
	t := time.NewTicker(r.cfg.ElectEvery)
	defer t.Stop()
	for {
		e.Elect(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// awaitLease returns at once while this relay holds the lease; otherwise
// it waits for it, marked awake (a standby loop marked asleep would make
// every insert NOTIFY), and returns false when ctx ends first.
func (r *Relay) awaitLease(ctx context.Context, sleep *database.Sleeper) bool {
	held, changed := r.lease.get()
	if held {
		return true
	}
	if sleep.Asleep() {
		sleep.Forget(ctx)
	}
	for !held {
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
		held, changed = r.lease.get()
	}
	return true
}

// WorkerID is the identity this relay stamps on its reservations.
func (r *Relay) WorkerID() string { return r.cfg.WorkerID }

// Run relays until ctx ends: claim loops woken by NOTIFY jejak_outbox (with
// polling as the ground truth), and maintenance. A batch in flight when ctx
// ends is still settled (within a few seconds) so nothing waits for reclaim.
func (r *Relay) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wakes := make([]chan struct{}, r.cfg.Concurrency)
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
	}
	// Each loop has its own mark: inserts notify while any loop of any
	// relay is asleep.
	sleepers := make([]*database.Sleeper, len(wakes))
	for i := range sleepers {
		sleepers[i] = database.NewSleeper(database.SleeperConfig{Pool: r.cfg.Pool, Channel: outboxChannel,
			Listener: r.cfg.WorkerID + "/" + strconv.Itoa(i), Poll: r.cfg.PollInterval,
			WarmFor: r.warmFor, WarmPoll: r.warmPoll, Log: r.log})
	}
	r.mu.Lock()
	r.wakes, r.sleepers = wakes, sleepers
	r.mu.Unlock()
	// A message this process publishes wakes the awake loops at its
	// commit; asleep ones get the NOTIFY.
	defer database.WakeLocal(r.cfg.Pool, outboxChannel, r.wakeAwake)()
	wg.Add(3 + len(wakes))
	go func() { defer wg.Done(); r.elect(ctx) }()
	go func() { defer wg.Done(); r.listen(ctx) }()
	go func() { defer wg.Done(); r.maintain(ctx) }()
	for i, w := range wakes {
		go func() { defer wg.Done(); r.loop(ctx, w, sleepers[i]) }()
	}
	wg.Wait()
}

// wakeAwake wakes the loops not marked asleep.
func (r *Relay) wakeAwake() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, w := range r.wakes {
		if r.sleepers[i].Asleep() {
			continue
		}
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

func (r *Relay) wakeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.wakes {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

func (r *Relay) loop(ctx context.Context, wake chan struct{}, sleep *database.Sleeper) {
	t := time.NewTimer(r.cfg.PollInterval)
	defer t.Stop()
	defer func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		sleep.Forget(fctx)
	}()
	// inflight is the previous batch being published and settled: the
	// next claim runs while its acknowledgements are awaited, so the
	// database and the broker work at the same time. At most two batches
	// per loop are out. Order holds: a batch's messages stay processing
	// until settled, which keeps their aggregates' next messages out of
	// any claim meanwhile.
	var inflight chan struct{}
	await := func() {
		if inflight != nil {
			<-inflight
			inflight = nil
		}
	}
	defer await()
	for ctx.Err() == nil {
		if !r.awaitLease(ctx, sleep) {
			return
		}
		msgs, err := r.claim(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Error("outbox relay batch", "err", err)
		}
		// A full batch left rows behind: the loop stays awake. Otherwise
		// the Sleeper decides how long to wait once nothing is claimable.
		if len(wake) > 0 {
			sleep.Again()
		}
		wait := sleep.Next(ctx, len(msgs), len(msgs) == r.cfg.BatchSize, err)
		if len(msgs) > 0 {
			prev, done := inflight, make(chan struct{})
			inflight = done
			go func() {
				defer close(done)
				if err := r.deliver(ctx, msgs); err != nil && ctx.Err() == nil {
					r.log.Error("outbox relay batch", "err", err)
				}
			}()
			if behind := waitSettled(prev); !behind && len(msgs) < r.cfg.BatchSize && r.cfg.Linger > 0 {
				// The claim took everything claimable: let what commits
				// next gather for one claim.
				if clock.Sleep(ctx, r.cfg.Linger) != nil {
					return
				}
			}
			// More may be waiting: a full batch left rows behind.
			continue
		}
		if err == nil && inflight != nil {
			// Nothing claimable while a batch is out: once it is
			// settled its aggregates' next messages may be.
			await()
			continue
		}
		if wait == 0 {
			continue
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-wake:
			sleep.Woken()
		case <-t.C:
		}
	}
}

// waitSettled waits for a loop's previous batch (nil: none) to be settled
// and reports whether it was still out. A loop that waits for it is
// behind: what commits meanwhile gathers anyway, and a linger on top only
// slows it. With a backlog a claim takes a fraction of a batch (an
// aggregate's next messages wait for its in-flight ones), so less than a
// batch does not mean nothing is left.
func waitSettled(prev <-chan struct{}) (behind bool) {
	if prev == nil {
		return false
	}
	select {
	case <-prev:
		return false
	default:
		<-prev
		return true
	}
}

// RunOnce claims one batch, publishes it and settles it; it returns how
// many messages it claimed.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	msgs, err := r.claim(ctx)
	if err != nil || len(msgs) == 0 {
		return 0, err
	}
	return len(msgs), r.deliver(ctx, msgs)
}

func (r *Relay) claim(ctx context.Context) ([]Envelope, error) {
	msgs, err := storeClaim(ctx, r.cfg.Pool, r.clk.Now(), r.cfg.WorkerID, r.cfg.BatchSize)
	if err != nil {
		return nil, fmt.Errorf("claim outbox batch: %w", err)
	}
	return msgs, nil
}

// deliver publishes a claimed batch and settles it.
func (r *Relay) deliver(ctx context.Context, msgs []Envelope) error {
	spans := startPublishSpans(ctx, msgs)
	pubCtx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	errs := r.publishRuns(pubCtx, msgs)
	cancel()
	for i, s := range spans {
		s.End(errs[i])
	}
	r.reportPublished(errs)
	if r.afterPublish != nil && r.afterPublish(msgs) {
		return errAbandoned
	}
	// Settle even when ctx ended meanwhile: what was published must be
	// marked, or it waits ten minutes for reclaim.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer scancel()
	return r.settle(sctx, ctx.Err() != nil, msgs, errs)
}

// startPublishSpans starts one span per message in the trace the message
// carries, so an exported trace runs from the request through the job
// that wrote the event to its publish. The batch is published as one, so
// the spans share its duration. Nil when spans are not exported.
func startPublishSpans(ctx context.Context, msgs []Envelope) []tracing.Span {
	if !tracing.Enabled() {
		return nil
	}
	spans := make([]tracing.Span, len(msgs))
	for i, m := range msgs {
		_, spans[i] = tracing.Start(reqctx.WithTrace(ctx, m.TraceID), "outbox.publish "+m.Type, "",
			attribute.String("jejak.event_id", m.EventID()), attribute.String("jejak.event_type", m.Type),
			attribute.Int64("jejak.tenant_id", m.TenantID), attribute.Int("jejak.attempt", m.Attempt))
	}
	return spans
}

// errBehindFailed is the outcome of a message left unpublished because an
// earlier message of its aggregate in the same batch failed: it goes back
// to pending without spending an attempt, behind that one.
var errBehindFailed = errors.New("not published: an earlier message of its aggregate failed")

// aggregateKey names the aggregate whose order a message keeps.
type aggregateKey struct {
	tenantID int64
	typ, id  string
}

func (e *Envelope) aggregateKey() aggregateKey {
	return aggregateKey{tenantID: e.TenantID, typ: e.AggregateType, id: e.AggregateID}
}

// publishRuns publishes a batch (in id order) one message an aggregate at a
// time: the n-th call to the sink carries each aggregate's n-th message of
// the batch, and an aggregate whose message failed sends nothing more. A
// claim takes an aggregate's waiting messages together, and a sink may
// fail some messages of one call and store the others (JetStream refuses a
// message when its stream is full, or gives up on one that timed out), so
// sending an aggregate's next message only once its previous one is
// acknowledged is what keeps the stream in aggregate order. A batch of
// distinct aggregates is one call.
func (r *Relay) publishRuns(ctx context.Context, msgs []Envelope) []error {
	// rounds[n] holds the batch's indexes of each aggregate's n-th message.
	var rounds [][]int
	count := map[aggregateKey]int{}
	for i := range msgs {
		k := msgs[i].aggregateKey()
		if count[k] == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[count[k]] = append(rounds[count[k]], i)
		count[k]++
	}
	errs := make([]error, len(msgs))
	failed := map[aggregateKey]bool{}
	var idx []int
	var batch []Envelope
	for _, round := range rounds {
		idx, batch = idx[:0], batch[:0]
		for _, i := range round {
			if failed[msgs[i].aggregateKey()] {
				errs[i] = errBehindFailed
				continue
			}
			idx, batch = append(idx, i), append(batch, msgs[i])
		}
		if len(batch) == 0 {
			continue
		}
		res := r.sink.Publish(ctx, batch)
		for j, i := range idx {
			if len(res) != len(batch) {
				errs[i] = errors.New("sink returned a wrong number of results")
			} else {
				errs[i] = res[j]
			}
			if errs[i] != nil {
				failed[msgs[i].aggregateKey()] = true
			}
		}
	}
	return errs
}

func (r *Relay) reportPublished(errs []error) {
	if r.cfg.OnPublished == nil {
		return
	}
	ok, failed := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, errBehindFailed):
			failed++
		}
	}
	if ok > 0 {
		r.cfg.OnPublished("ok", ok)
	}
	if failed > 0 {
		r.cfg.OnPublished("error", failed)
	}
}

func (r *Relay) settle(ctx context.Context, stopping bool, msgs []Envelope, errs []error) error {
	var ok, release, failed msgKeys
	var reasons []string
	var delays []float64
	for i, m := range msgs {
		switch {
		case errs[i] == nil:
			ok.add(m)
		case stopping && errors.Is(errs[i], context.Canceled), errors.Is(errs[i], errBehindFailed):
			// Not a failure of the message: we are shutting down, or it
			// was never sent.
			release.add(m)
		default:
			failed.add(m)
			reasons = append(reasons, clip.Bytes(errs[i].Error(), 1000))
			delays = append(delays, r.cfg.Backoff(m.Attempt).Seconds())
		}
	}
	now := r.clk.Now()
	if len(ok.ids) > 0 {
		if _, err := storeMarkDelivered(ctx, r.cfg.Pool, now, r.cfg.WorkerID, ok); err != nil {
			return fmt.Errorf("mark %d outbox messages delivered: %w", len(ok.ids), err)
		}
	}
	if len(release.ids) > 0 {
		if _, err := storeRelease(ctx, r.cfg.Pool, r.cfg.WorkerID, release); err != nil {
			return fmt.Errorf("release %d outbox messages: %w", len(release.ids), err)
		}
	}
	dead := 0
	if len(failed.ids) > 0 {
		var err error
		if dead, err = storeMarkFailed(ctx, r.cfg.Pool, now, r.cfg.WorkerID, r.cfg.MaxAttempts, failed, reasons, delays); err != nil {
			return fmt.Errorf("mark %d outbox messages for retry: %w", len(failed.ids), err)
		}
		r.log.Warn("outbox publish failed", "messages", len(failed.ids), "now_failed", dead, "first_error", reasons[0])
	}
	if dead > 0 {
		if err := storeStatsAdd(ctx, r.cfg.Pool, now, 0, dead); err != nil {
			return fmt.Errorf("outbox stats: %w", err)
		}
	}
	return nil
}

// Maintain reclaims stale reservations and, on the leader, prunes
// delivered messages and old statistics. Run calls it periodically.
func (r *Relay) Maintain(ctx context.Context) error {
	now := r.clk.Now()
	n, err := storeReclaim(ctx, r.cfg.Pool, now, r.cfg.ReclaimAfter)
	if err != nil {
		return fmt.Errorf("reclaim outbox reservations: %w", err)
	}
	if n > 0 {
		r.log.Warn("reclaimed stale outbox reservations", "messages", n)
		r.wakeAll()
	}
	if r.cfg.IsLeader == nil || !r.cfg.IsLeader() {
		return nil
	}
	if r.cfg.Retention > 0 && !r.cfg.ScheduledPrune {
		if _, err := PruneDelivered(ctx, r.cfg.Pool, now, r.cfg.Retention); err != nil {
			return err
		}
	}
	if _, err := storeStatsPrune(ctx, r.cfg.Pool, now, 48*time.Hour); err != nil {
		return fmt.Errorf("prune outbox stats: %w", err)
	}
	return nil
}

// DefaultRetention is how long delivered messages are kept.
const DefaultRetention = 24 * time.Hour

// PruneDelivered deletes delivered messages older than olderThan in
// bounded slices and reports how many it deleted.
func PruneDelivered(ctx context.Context, db database.Querier, now *time.Time, olderThan time.Duration) (int64, error) {
	var total int64
	for {
		n, err := storePrune(ctx, db, now, olderThan, 5000)
		if err != nil {
			return total, fmt.Errorf("prune delivered outbox messages: %w", err)
		}
		total += n
		if n == 0 || ctx.Err() != nil {
			return total, nil
		}
	}
}

func (r *Relay) maintain(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.Maintain(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("outbox maintenance", "err", err)
		}
		t.Reset(r.cfg.MaintenanceInterval)
	}
}

// listen wakes the claim loops on every NOTIFY jejak_outbox; polling
// covers the time the LISTEN connection is down.
func (r *Relay) listen(ctx context.Context) {
	database.Listen(ctx, r.cfg.Pool, outboxChannel, r.cfg.PollInterval, r.log, r.wakeAll)
}
