package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/database"
)

// runState is everything a started engine runs: one producer that claims
// batches and hands jobs to Workers goroutines, a completer that marks
// finished jobs succeeded in batches, a LISTEN connection, a heartbeat and
// the maintenance elector.
type runState struct {
	ctx       context.Context // cancelled by Stop (or the Start context)
	cancel    context.CancelFunc
	prodCtx   context.Context // cancelled first on Stop: no more claims
	prodStop  context.CancelFunc
	hardCtx   context.Context // handlers' parent; cancelled at the Stop deadline
	hardStop  context.CancelFunc
	jobs      chan *Job
	wake      chan struct{}
	slotFreed chan struct{}
	inflight  atomic.Int64
	// parked is how long the producer waits for a wake-up while it waits
	// (0 while it claims): a loop parked for its whole poll interval is
	// asleep and settled, so only a wake-up makes it claim again.
	parked atomic.Int64
	// wakeMu orders wake-ups with the producer taking them: sent counts
	// every wake-up handed to the wake channel, taken is sent as the
	// producer read it when it last took one. Equal while the producer
	// waits, no wake-up is on its way to it.
	wakeMu      sync.Mutex
	sent, taken int64

	// sleep is the producer's mark in wake_listeners: inserts NOTIFY
	// jejak_jobs only while it (or another replica's producer) sleeps.
	sleep  *database.Sleeper
	unwake func() // unregisters the local wake-up

	heldMu sync.Mutex
	held   map[int64]*heldJob // claimed and not yet handed to the completer / failed
	// finishing counts jobs taken out of held whose outcome is still being
	// recorded; Stop waits for them so it returns with every outcome stored.
	finishing sync.WaitGroup

	comp *completer

	prodDone    chan struct{}
	workersDone sync.WaitGroup
	bgDone      sync.WaitGroup // listener, heartbeat, maintenance
}

type heldJob struct {
	job *Job
	// cancel stops the handler (with ErrLeaseLost when the claim is lost);
	// nil until a worker starts it.
	cancel context.CancelCauseFunc
	// renewed is when the lease was last known good, by this process's
	// monotonic clock, taken before the statement that set it: the local
	// deadline renewed+LeaseDuration never passes after the database's.
	renewed time.Time
}

// ErrLeaseLost is the cause of a handler's cancelled context when the
// heartbeat learns its claim is gone (rescued after the lease ran out, or
// the database was unreachable for longer than a lease).
var ErrLeaseLost = errors.New("job lease lost: another worker may run this job now")

// errShutdown marks a failure caused by Stop cutting a running handler
// short: the attempt counts (a handler that ignores cancellation must
// still use up its attempts) but the retry is due at once.
var errShutdown = errors.New("worker shut down while the handler was running")

// Start runs the worker pool (when Workers > 0), the heartbeat and the
// leader-elected maintenance loop, and returns at once. Cancelling ctx stops
// everything abruptly; Stop stops gracefully.
func (e *Engine) Start(ctx context.Context) error {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	if e.run != nil {
		return errors.New("job engine already started")
	}
	if e.stopped.Load() {
		return errors.New("job engine was stopped; create a new one")
	}
	r := &runState{
		jobs:      make(chan *Job, max(e.inflightLimit(), 1)),
		wake:      make(chan struct{}, 1),
		slotFreed: make(chan struct{}, 1),
		held:      map[int64]*heldJob{},
		prodDone:  make(chan struct{}),
	}
	r.ctx, r.cancel = context.WithCancel(ctx)
	r.prodCtx, r.prodStop = context.WithCancel(r.ctx)
	r.hardCtx, r.hardStop = context.WithCancel(r.ctx)
	// The heartbeat's session listens before the worker registers: a
	// worker that joins later is heard of, one that joined earlier is
	// counted by this registration.
	bc := &beatConn{e: e}
	sl, err := storeWorkerUpsert(ctx, bc.db(ctx), e.clock.Now(), e.workerInfo(r), e.cfg.LeaseDuration)
	if err != nil {
		bc.close()
		r.cancel()
		return fmt.Errorf("register job worker: %w", err)
	}
	e.setSlot(sl)
	e.run = r
	if e.cfg.Workers > 0 {
		r.sleep = database.NewSleeper(database.SleeperConfig{Pool: e.pool, Channel: jobsChannel,
			Listener: e.cfg.WorkerID, Poll: e.cfg.PollInterval, WarmFor: e.warmFor, WarmPoll: e.warmPoll, Log: e.log})
		// A job this process enqueues wakes the producer at its commit.
		// Only an awake producer needs it: an asleep one gets the NOTIFY.
		r.unwake = database.WakeLocal(e.pool, jobsChannel, func() {
			if !r.sleep.Asleep() {
				r.wakeUp()
			}
		})
		r.comp = newCompleter(e)
		if e.cfg.TenantConcurrency > 0 {
			// A flush frees the places of a tenant at its cap.
			r.comp.flushed = r.wakeUp
		}
		go r.comp.loop(r.ctx)
		for range e.cfg.Workers {
			r.workersDone.Add(1)
			go e.worker(r)
		}
		r.bgDone.Add(1)
		go e.listen(r)
		go e.produce(r)
	} else {
		close(r.prodDone)
	}
	r.bgDone.Add(1)
	go e.heartbeat(r, bc)
	if !e.cfg.NoMaintenance {
		r.bgDone.Add(1)
		go e.maintain(r)
	}
	return nil
}

// Stop stops claiming, waits for running handlers until ctx is done,
// cancels the ones still running and releases their jobs back to pending
// without consuming an attempt, flushes completions and leaves the
// maintenance leadership. It returns ctx's error if the deadline cut
// handlers short.
func (e *Engine) Stop(ctx context.Context) error {
	e.runMu.Lock()
	r := e.run
	e.run = nil
	e.runMu.Unlock()
	if r == nil {
		return nil
	}
	e.stopped.Store(true)
	// Detached from the caller's deadline: the release and flush below
	// must still run after it passes.
	cleanup := context.WithoutCancel(ctx)

	r.prodStop()
	<-r.prodDone
	e.release(cleanup, r.drainUnstarted())
	deadlineErr := r.waitWorkers(ctx)
	if r.comp != nil {
		r.comp.stop(cleanup)
	}
	e.settleHeld(cleanup, r)
	r.waitRecorded(e.log)

	r.cancel()
	r.bgDone.Wait()
	if err := storeWorkerDelete(cleanup, e.pool, e.cfg.WorkerID); err != nil {
		e.log.Warn("remove job worker row", "err", err)
	}
	return deadlineErr
}

// drainUnstarted takes the jobs claimed but not yet picked up by a worker
// off the queue (they go straight back) and closes it.
func (r *runState) drainUnstarted() []claimToken {
	var unstarted []claimToken
	for {
		select {
		case j := <-r.jobs:
			if r.releaseHeld(j) {
				unstarted = append(unstarted, claimToken{j.TenantID, j.ID, j.Attempt})
				r.finishing.Done()
			}
			r.inflight.Add(-1)
		default:
			close(r.jobs)
			return unstarted
		}
	}
}

// waitWorkers waits for the running handlers until ctx is done, then
// cancels their contexts and returns ctx's error.
func (r *runState) waitWorkers(ctx context.Context) error {
	done := make(chan struct{})
	go func() { r.workersDone.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		r.hardStop() // handlers see their context cancelled
		return ctx.Err()
	}
}

// settleHeld ends whatever is still held after the workers' deadline. A
// handler that has started counts its attempt: handing it back with
// attempt - 1 would let a handler that ignores cancellation run forever.
// Jobs that never started are released.
func (e *Engine) settleHeld(ctx context.Context, r *runState) {
	r.heldMu.Lock()
	var notStarted []claimToken
	var cut []*Job
	for _, h := range r.held {
		if h.cancel == nil {
			notStarted = append(notStarted, claimToken{h.job.TenantID, h.job.ID, h.job.Attempt})
		} else {
			h.cancel(errShutdown)
			cut = append(cut, h.job)
		}
	}
	r.held = map[int64]*heldJob{}
	r.heldMu.Unlock()
	e.release(ctx, notStarted)
	for _, j := range cut {
		if _, err := e.failJob(ctx, j, errShutdown); err != nil {
			e.log.Error("record job cut short by shutdown", "job_id", j.ID, "err", err)
		}
	}
}

// waitRecorded waits (boundedly) for handlers that returned before
// settleHeld's snapshot and are recording their outcome, so Stop returns
// with it stored.
func (r *runState) waitRecorded(log *slog.Logger) {
	recorded := make(chan struct{})
	go func() { r.finishing.Wait(); close(recorded) }()
	select {
	case <-recorded:
	case <-time.After(10 * time.Second):
		log.Warn("job outcomes still being recorded at shutdown")
	}
}

func (e *Engine) release(ctx context.Context, ids []claimToken) {
	if len(ids) == 0 {
		return
	}
	n, err := storeRelease(ctx, e.pool, e.cfg.WorkerID, ids)
	if err != nil {
		e.log.Error("release unfinished jobs", "err", err, "jobs", len(ids))
		return
	}
	e.log.Info("released unfinished jobs back to pending", "jobs", n)
	_ = storeNotify(ctx, e.pool)
}

func (e *Engine) workerInfo(r *runState) WorkerInfo {
	return WorkerInfo{
		WorkerID: e.cfg.WorkerID, Running: int(r.inflight.Load()), Capacity: e.cfg.Workers,
		Queues: e.cfg.Queues, Leader: e.leader.Load(),
	}
}

// track records a fresh claim of j whose lease was set no earlier than
// claimedAt. An older attempt of the same job still running here lost its
// claim (it was rescued and claimed again): its handler is cancelled.
func (r *runState) track(j *Job, claimedAt time.Time) {
	r.heldMu.Lock()
	if old, ok := r.held[j.ID]; ok && old.cancel != nil {
		old.cancel(ErrLeaseLost)
	}
	j.claimedAt = claimedAt
	r.held[j.ID] = &heldJob{job: j, renewed: claimedAt}
	r.heldMu.Unlock()
}

// begin gives a worker the context to run j with, or false when the claim
// was lost while j waited in the channel.
func (r *runState) begin(j *Job) (context.Context, bool) {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	h, ok := r.held[j.ID]
	if !ok || h.job != j {
		return nil, false
	}
	ctx, cancel := context.WithCancelCause(r.hardCtx)
	h.cancel = cancel
	return ctx, true
}

// lose drops the claims in lost (if they are still the ones held) and
// cancels their handlers.
func (r *runState) lose(lost []*Job) int {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	n := 0
	for _, j := range lost {
		h, ok := r.held[j.ID]
		if !ok || h.job != j {
			continue
		}
		delete(r.held, j.ID)
		if h.cancel != nil {
			h.cancel(ErrLeaseLost)
		}
		n++
	}
	return n
}

// releaseHeld drops j from the held set if it is still this claim of the job,
// and reports whether it was: a job rescued and re-claimed by this same
// engine while an old attempt was still running must not be completed or
// failed by that old attempt.
func (r *runState) releaseHeld(j *Job) bool {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	h, ok := r.held[j.ID]
	if !ok || h.job != j {
		return false
	}
	delete(r.held, j.ID)
	if h.cancel != nil {
		h.cancel(nil) // the handler has returned: free the context
	}
	r.finishing.Add(1) // under heldMu: ordered before Stop's snapshot and wait
	return true
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// inflightLimit bounds the jobs claimed and not yet finished: the workers'
// and as many again claimed ahead, waiting in the channel, so the next
// claim's round trip overlaps with the handlers instead of leaving workers
// idle while it runs. Stop releases any that never started.
func (e *Engine) inflightLimit() int { return 2 * e.cfg.Workers }

// jobsChannel is the NOTIFY channel of the jobs insert trigger.
const jobsChannel = "jejak_jobs"

// produce claims batches while there are free worker slots and due jobs,
// and otherwise waits for a wake-up, a freed slot or the time its Sleeper
// gives: a few milliseconds while jobs keep coming (no NOTIFY is sent
// then), the poll interval once it is marked asleep.
func (e *Engine) produce(r *runState) {
	defer close(r.prodDone)
	ctx := r.prodCtx
	defer func() {
		r.unwake()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		r.sleep.Forget(fctx)
	}()
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		free, ok := e.freeSlots(r)
		if !ok {
			return
		}
		if free <= 0 {
			continue
		}
		n := min(free, e.cfg.BatchSize)
		claimedAt := time.Now() //nolint:forbidigo // local lease deadline, not domain time
		// Stop cuts the claim's wait for a connection, not its statement
		// (claimQueue).
		jobs, drained, err := e.claim(ctx, e.cfg.WorkerID, n)
		if err != nil && ctx.Err() == nil {
			e.log.Error("claim jobs", "err", err)
		}
		for _, j := range jobs {
			r.inflight.Add(1)
			r.track(j, claimedAt)
			r.jobs <- j // never blocks: at most inflightLimit jobs are in flight
		}
		// More may be due right now, unless the claim took every job that
		// was due (an idle queue's small claim): then the next job comes
		// with a wake-up or the Sleeper's poll, and claiming again at once
		// would only compete for the CPU with the handlers just handed
		// their jobs.
		if len(r.wake) > 0 {
			r.sleep.Again()
		}
		// A claim that filled every slot is followed by a wait for a free
		// slot, not for a wake-up: the loop is marked awake (as when more
		// is due), so inserts meanwhile send no NOTIFY it could not act on.
		full := int(r.inflight.Load()) >= e.inflightLimit()
		wait := r.sleep.Next(ctx, len(jobs), err == nil && len(jobs) > 0 && (!drained || full), err)
		if wait > 0 && !r.park(poll, wait) {
			return
		}
	}
}

// freeSlots is how many jobs the producer may claim now. When completions
// back up or every slot is taken it first waits (marked busy) for a flush
// or a freed slot and answers 0, so the caller looks again; ok is false
// once the producer is stopping.
func (e *Engine) freeSlots(r *runState) (free int, ok bool) {
	ctx := r.prodCtx
	// Completions are part of a job's cost: when they back up, stop
	// claiming until a flush catches up, or the running set (and every
	// query that touches it) grows without bound.
	if r.comp.backlog.Load() >= maxCompleteBatch {
		r.sleep.Busy(ctx)
		select {
		case <-ctx.Done():
			return 0, false
		case <-r.comp.drained:
		}
		return 0, true
	}
	free = e.inflightLimit() - int(r.inflight.Load())
	if free <= 0 {
		r.sleep.Busy(ctx)
		select {
		case <-ctx.Done():
			return 0, false
		case <-r.slotFreed:
		}
		return 0, true
	}
	return free, true
}

// park waits up to wait for a wake-up; false once the producer is
// stopping.
func (r *runState) park(poll *time.Timer, wait time.Duration) bool {
	if !poll.Stop() {
		select {
		case <-poll.C:
		default:
		}
	}
	poll.Reset(wait)
	r.parked.Store(int64(wait))
	select {
	case <-r.prodCtx.Done():
		return false
	case <-r.wake:
		// Unparked before taken is updated: a producer on its way to a
		// claim never looks idle.
		r.parked.Store(0)
		r.wakeMu.Lock()
		r.taken = r.sent
		r.wakeMu.Unlock()
		r.sleep.Woken()
	case <-poll.C:
		r.parked.Store(0)
	}
	return true
}

// wakeUp hands the producer a wake-up; several before it takes one count
// as one.
func (r *runState) wakeUp() {
	r.wakeMu.Lock()
	r.sent++
	signal(r.wake)
	r.wakeMu.Unlock()
}

// worker runs jobs until the channel closes at Stop.
func (e *Engine) worker(r *runState) {
	defer r.workersDone.Done()
	for j := range r.jobs {
		if ctx, ok := r.begin(j); ok {
			e.execute(r, j, ctx)
		}
		r.inflight.Add(-1)
		signal(r.slotFreed)
	}
}

func (e *Engine) execute(r *runState, j *Job, hctx context.Context) {
	audited := e.sensitive(j.Kind)
	if audited {
		if err := e.recordStarted(context.WithoutCancel(r.ctx), j); err != nil {
			e.log.Error("audit job start", "job_id", j.ID, "err", err)
		}
	}
	began := time.Now() //nolint:forbidigo // duration measurement, not domain time
	err := e.invokeCtx(hctx, j)
	run := time.Since(began)
	if !r.releaseHeld(j) {
		// The lease was lost (or Stop recorded the attempt): whoever holds
		// the job now decides its fate; the claim token fences us out.
		e.log.Warn("job attempt finished after its claim was lost", "job_id", j.ID, "attempt", j.Attempt,
			"cause", context.Cause(hctx))
		return
	}
	defer r.finishing.Done()
	if err != nil && r.hardCtx.Err() != nil {
		err = fmt.Errorf("%w: %w", errShutdown, err)
	}
	ctx := context.WithoutCancel(r.ctx)
	if err == nil {
		e.observeAttempt(j, nil, "", run)
		if !e.audited(j) {
			r.comp.add(j)
		} else if cerr := e.completeAudited(ctx, j); cerr != nil {
			// Left running: lease rescue retries it (at least once).
			e.log.Error("complete audited job", "job_id", j.ID, "err", cerr)
		}
		return
	}
	if after, reason, ok := DelayOf(err); ok {
		if derr := e.delayJob(ctx, j, after, reason); derr != nil {
			e.log.Error("delay job", "job_id", j.ID, "err", derr)
		}
		e.observeDelay(j, reason)
		return
	}
	// Failures are rare: record them one by one, with the attempt history.
	st, ferr := e.failJob(ctx, j, err)
	if ferr != nil {
		e.log.Error("record job failure", "job_id", j.ID, "err", ferr)
		return
	}
	e.observeAttempt(j, err, st, run)
	e.log.Warn("job failed", "job_id", j.ID, "tenant_id", j.TenantID, "kind", j.Kind,
		"trace_id", j.TraceID, "attempt", j.Attempt, "class", ClassOf(err), "state", st, "err", err)
}

// invokeCtx runs the handler with its timeout, turning panics into
// transient failures, unknown kinds into permanent ones and expired or
// tampered jobs into policy failures.
func (e *Engine) invokeCtx(ctx context.Context, j *Job) (err error) {
	ctx, span := e.attemptContext(ctx, j)
	defer func() { span.End(err) }()
	k, ok := e.handler(j.Kind)
	if !ok {
		return Permanent(fmt.Errorf("%w: %s", ErrUnknownKind, j.Kind))
	}
	if err := checkVersion(k.opts, j); err != nil {
		return err
	}
	// Checked as the handler starts, not only at claim: a job claimed ahead
	// may wait a whole handler duration in the channel.
	if j.ExpiresAt != nil && !e.startTime(j).Before(*j.ExpiresAt) {
		return Policy(fmt.Errorf("%w: expired at %s", ErrExpired, j.ExpiresAt.Format(time.RFC3339)))
	}
	if !j.payloadIntact {
		return Policy(ErrPayloadTampered)
	}
	if k.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, k.opts.Timeout)
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf(panicPrefix+"%v\n%s", p, debug.Stack())
		}
	}()
	return k.h(ctx, j)
}

// startTime is "now" on the engine's clock as a handler starts: the
// injected clock when it has a reading, else the database's claim time
// plus the local time elapsed since the claim (no round trip per job).
func (e *Engine) startTime(j *Job) time.Time {
	if t := e.clock.Now(); t != nil {
		return *t
	}
	if j.claimedAt.IsZero() {
		return j.AttemptedAt
	}
	return j.AttemptedAt.Add(time.Since(j.claimedAt))
}

// listen wakes the producer on every NOTIFY jejak_jobs; polling covers
// the time the LISTEN connection is down.
func (e *Engine) listen(r *runState) {
	defer r.bgDone.Done()
	database.Listen(r.prodCtx, e.pool, jobsChannel, e.cfg.PollInterval, e.log, func() {
		r.wakeUp()
		// Counted once handed over: whoever sees the count has the
		// wake-up waiting for the loop (or already taken).
		e.stats.notifications.Add(1)
	})
}

// heartbeat refreshes this engine's job_workers row and renews the lease
// of every job it holds (running or claimed ahead), so a replica that
// vanishes loses its jobs one lease after its last beat. It speaks on a
// connection of its own, outside the pool: claims, completions, the relay
// and staff pages can hold every pooled connection at once, and a renewal
// queued behind them would let a live worker's leases run out. Between
// beats that session listens for workers joining or leaving the table
// and beats at once when one does, so every worker's share of the tenants
// (affinity.go) is counted again within milliseconds of the change.
func (e *Engine) heartbeat(r *runState, bc *beatConn) {
	defer r.bgDone.Done()
	defer bc.close()
	for next := time.Now().Add(e.cfg.HeartbeatInterval); bc.await(r.ctx, next); { //nolint:forbidigo // beat cadence, not domain time
		next = time.Now().Add(e.cfg.HeartbeatInterval) //nolint:forbidigo // beat cadence, not domain time
		e.beat(r.ctx, r, bc)
	}
}

// workersChannel is the NOTIFY channel of job_workers' insert and delete
// triggers (a worker joined or left).
const workersChannel = "jejak_workers"

// beatConn is the heartbeat's dedicated connection, opened with the
// pool's settings (login, role, session limits) and reopened after an
// error. It costs one connection per replica, like the maintenance
// leader's.
type beatConn struct {
	e        *Engine
	conn     *pgx.Conn
	fellBack bool // the last open failed and the pool was used (logged once)
}

// db returns the dedicated connection, opening it (and listening on
// workersChannel) if needed; if it cannot be opened (max_connections
// reached, say) the beat goes through the pool as a fallback, and the
// beats keep their interval.
func (b *beatConn) db(ctx context.Context) database.Querier {
	if b.conn != nil && !b.conn.IsClosed() {
		return b.conn
	}
	c, err := database.OwnConn(ctx, b.e.pool)
	if err == nil {
		if _, err = c.Exec(ctx, "LISTEN "+workersChannel); err != nil {
			database.CloseOwn(c)
		}
	}
	if err != nil {
		if !b.fellBack && ctx.Err() == nil {
			b.e.log.Warn("heartbeat connection: open failed; renewing through the shared pool", "err", err)
		}
		b.fellBack = true
		return b.e.pool
	}
	b.conn, b.fellBack = c, false
	return c
}

// await waits until next or until a worker joins or leaves the table,
// whichever comes first; false when ctx ended. Several joins heard at once
// make one beat.
func (b *beatConn) await(ctx context.Context, next time.Time) bool {
	if b.conn != nil && !b.conn.IsClosed() {
		wctx, cancel := context.WithDeadline(ctx, next)
		_, err := b.conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return false
		case err == nil:
			b.drain()
			return true
		case wctx.Err() != nil:
			// The deadline: the connection stays usable.
			return true
		default:
			b.failed()
		}
	}
	t := time.NewTimer(time.Until(next))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// drain takes the notifications already received (while a beat ran, or
// several joins at once): the beat about to run counts them all.
func (b *beatConn) drain() {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for {
		if n, _ := b.conn.WaitForNotification(done); n == nil {
			return
		}
	}
}

// failed drops the connection after an error: a statement cut by the
// beat's deadline leaves it in an unknown state.
func (b *beatConn) failed() { b.close() }

func (b *beatConn) close() {
	if b.conn != nil {
		database.CloseOwn(b.conn)
		b.conn = nil
	}
}

func (e *Engine) beat(ctx context.Context, r *runState, bc *beatConn) {
	// A renewal that hangs (a network that drops packets rather than
	// refusing them) must count as a failed one, or the local lease check
	// below would never run. Its bound is a third of the lease, not one
	// interval: a short interval (100 ms) bounded the reopening of the
	// connection too, and on a loaded machine every beat then failed to
	// connect in time, closed what it had and started over, until the
	// lease ran out under a live worker. A third still leaves two more
	// tries before the lease ends.
	ctx, cancel := context.WithTimeout(ctx, max(e.cfg.HeartbeatInterval, e.cfg.LeaseDuration/3))
	defer cancel()
	began := time.Now() //nolint:forbidigo // local lease deadline, not domain time
	var tokens []claimToken
	jobs := map[int64]*Job{}
	r.heldMu.Lock()
	for id, h := range r.held {
		tokens = append(tokens, claimToken{h.job.TenantID, id, h.job.Attempt})
		jobs[id] = h.job
	}
	r.heldMu.Unlock()
	db := bc.db(ctx)
	if len(tokens) > 0 {
		kept, err := storeRenew(ctx, db, e.clock.Now(), e.cfg.WorkerID, tokens, e.cfg.LeaseDuration)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Error("renew job leases", "err", err)
			}
			bc.failed()
			e.expireUnrenewed(r, began)
			db = bc.db(ctx)
		} else {
			e.renewed(r, jobs, kept, began)
		}
	}
	// The workers that beat within a lease share the tenants (affinity.go);
	// one that stopped beating is out of the count a lease later, when
	// its jobs are rescued too.
	sl, err := storeWorkerUpsert(ctx, db, e.clock.Now(), e.workerInfo(r), e.cfg.LeaseDuration)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error("job worker heartbeat", "err", err)
		}
		bc.failed()
		return
	}
	e.setSlot(sl)
}

// renewed records a successful renewal: the kept claims are good until
// at+LeaseDuration; the others were lost and their handlers are cancelled.
func (e *Engine) renewed(r *runState, sent map[int64]*Job, kept []int64, at time.Time) {
	r.heldMu.Lock()
	for _, id := range kept {
		if h, ok := r.held[id]; ok && h.job == sent[id] {
			h.renewed = at
		}
		delete(sent, id)
	}
	r.heldMu.Unlock()
	if len(sent) == 0 {
		return
	}
	lost := make([]*Job, 0, len(sent))
	for _, j := range sent {
		lost = append(lost, j)
	}
	if n := r.lose(lost); n > 0 {
		e.log.Warn("job leases lost; their handlers are cancelled", "jobs", n)
	}
}

// expireUnrenewed gives up the claims whose lease has run out by the local
// clock while renewals failed: rescue may already have handed them to
// another worker, so their handlers must stop.
func (e *Engine) expireUnrenewed(r *runState, now time.Time) {
	var lost []*Job
	r.heldMu.Lock()
	for _, h := range r.held {
		if now.Sub(h.renewed) >= e.cfg.LeaseDuration {
			lost = append(lost, h.job)
		}
	}
	r.heldMu.Unlock()
	if n := r.lose(lost); n > 0 {
		e.log.Warn("job leases expired while the database was unreachable; handlers cancelled", "jobs", n)
	}
}

// completer marks finished jobs succeeded in batches: one UPDATE per flush,
// whatever accumulated while the previous flush ran. There is no timer, so
// an idle engine completes a job immediately and a busy one in bulk.
type completer struct {
	e       *Engine
	mu      sync.Mutex
	ids     []claimToken
	backlog atomic.Int64 // ids waiting for or inside a flush
	kick    chan struct{}
	stopped bool
	done    chan struct{}
	quit    chan struct{}
	drained chan struct{} // a flush finished: the producer may claim again
	flushed func()        // called after each flush that completed jobs, if set
}

func newCompleter(e *Engine) *completer {
	return &completer{e: e, kick: make(chan struct{}, 1), done: make(chan struct{}), quit: make(chan struct{}),
		drained: make(chan struct{}, 1)}
}

func (c *completer) add(j *Job) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		// A handler that finished after Stop's deadline: complete it
		// directly (ErrNotHeld if Stop already recorded the attempt).
		if err := c.e.CompleteAttempt(context.Background(), c.e.cfg.WorkerID, j.TenantID, j.ID, j.Attempt); err != nil {
			c.e.log.Warn("late completion after shutdown", "job_id", j.ID, "err", err)
		}
		return
	}
	c.ids = append(c.ids, claimToken{j.TenantID, j.ID, j.Attempt})
	c.backlog.Add(1)
	c.mu.Unlock()
	signal(c.kick)
}

func (c *completer) loop(ctx context.Context) {
	defer close(c.done)
	for {
		select {
		case <-c.kick:
		case <-c.quit:
			c.flush(context.WithoutCancel(ctx))
			return
		}
		c.flush(context.WithoutCancel(ctx))
	}
}

const maxCompleteBatch = 5000

func (c *completer) flush(ctx context.Context) {
	for {
		c.mu.Lock()
		n := min(len(c.ids), maxCompleteBatch)
		ids := c.ids[:n:n]
		c.ids = c.ids[n:]
		c.mu.Unlock()
		if n == 0 {
			return
		}
		var err error
		for try := 0; try < 3; try++ {
			var done []int64
			began := time.Now()
			done, err = storeCompleteMany(ctx, c.e.pool, c.e.clock.Now(), c.e.cfg.WorkerID, ids)
			if err == nil {
				c.e.stats.flushes.Add(1)
				c.e.stats.completed.Add(int64(len(done)))
				c.e.stats.flushNanos.Add(int64(time.Since(began)))
				if len(done) != len(ids) {
					c.e.log.Warn("some completed jobs were no longer held (lease lost or released)",
						"completed", len(done), "submitted", len(ids))
				}
				break
			}
		}
		if err != nil {
			// The jobs stay running; lease rescue retries them (at least once).
			c.e.log.Error("mark jobs succeeded", "err", err, "jobs", len(ids))
		}
		c.backlog.Add(-int64(n))
		signal(c.drained)
		if c.flushed != nil && err == nil {
			c.flushed()
		}
	}
}

func (c *completer) stop(ctx context.Context) {
	c.mu.Lock()
	already := c.stopped
	c.stopped = true
	c.mu.Unlock()
	if !already {
		close(c.quit)
	}
	<-c.done
}

// maintenanceLockKey is the advisory lock the maintenance leader holds
// (per database). Chosen arbitrarily; documented in docs/jobs.md.
const maintenanceLockKey = 727275

// maintain elects one leader among replicas with pg_try_advisory_lock on a
// session of its own, outside the pool (the lock dies with the session,
// so a crashed leader is replaced at once) and, while leading, rescues
// expired leases and prunes finished jobs every MaintenanceInterval.
func (e *Engine) maintain(r *runState) {
	defer r.bgDone.Done()
	ls := e.election()
	defer ls.Drop() // the lock ends with the session
	t := time.NewTimer(0)
	defer t.Stop()
	every := min(e.cfg.MaintenanceInterval, e.cfg.HeartbeatInterval)
	var lastPrune time.Time
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now() //nolint:forbidigo // interval bookkeeping, not domain time
		prune := now.Sub(lastPrune) >= e.cfg.MaintenanceInterval
		if e.maintainOnce(r.ctx, ls, prune) {
			lastPrune = now
		}
		t.Reset(every)
	}
}

// maintainOnce tries to become (or stay) leader and, if it is, rescues
// expired leases and, when prune is set, prunes. It reports whether it
// pruned. Rescue runs every heartbeat so a dead replica's jobs come back
// within a lease and a beat.
func (e *Engine) maintainOnce(ctx context.Context, ls *database.Election, prune bool) bool {
	lead := ls.Elect(ctx)
	if lead == nil || ctx.Err() != nil {
		return false
	}
	if _, err := e.rescue(ctx, lead); err != nil {
		if ctx.Err() == nil {
			e.log.Error("maintenance: rescue", "err", err)
		}
		// A broken connection has lost the lock; let another replica lead.
		if lead.IsClosed() || lead.Ping(ctx) != nil {
			ls.Drop()
		}
		return false
	}
	// Every beat, not every prune pass: the statistics of a table that
	// grows fast must follow it within seconds, or cached plans made when
	// it was small stay (see RefreshStatistics).
	if tables, err := RefreshStatistics(ctx, lead); err != nil && ctx.Err() == nil {
		e.log.Error("maintenance: refresh statistics", "err", err)
	} else if len(tables) > 0 {
		e.log.Debug("analyzed tables", "tables", tables)
	}
	if !prune {
		return false
	}
	if e.cfg.ScheduledPrune {
		// The scheduler's job.retention schedule prunes.
	} else if n, err := e.prune(ctx, lead); err != nil {
		if ctx.Err() == nil {
			e.log.Error("maintenance: prune", "err", err)
		}
	} else if n > 0 {
		e.log.Info("pruned finished jobs", "jobs", n)
	}
	if _, err := storeWorkerDeleteStale(ctx, lead, e.clock.Now(), 24*time.Hour); err != nil && ctx.Err() == nil {
		e.log.Error("maintenance: prune stale workers", "err", err)
	}
	// A claim loop that died asleep makes every insert NOTIFY until its
	// row goes.
	if _, err := database.PruneSleepers(ctx, lead); err != nil && ctx.Err() == nil {
		e.log.Error("maintenance: prune sleeping claim loops", "err", err)
	}
	// Keep the overview's unfinished counts a short sum: fold the deltas
	// appended since the last pass.
	if _, err := storeCountsFold(ctx, lead); err != nil && ctx.Err() == nil {
		e.log.Error("maintenance: fold job counts", "err", err)
	}
	// The overview's "due now" is pending minus the jobs scheduled ahead,
	// counted here once per pass rather than by every overview refresh.
	if err := storeCountScheduled(ctx, lead, e.clock.Now()); err != nil && ctx.Err() == nil {
		e.log.Error("maintenance: count scheduled jobs", "err", err)
	}
	// Owners chart 30 days: fold the minutes into days before pruning them.
	if _, err := StatsFoldDays(ctx, lead, e.clock.Now()); err != nil && ctx.Err() == nil {
		e.log.Error("maintenance: fold job stats", "err", err)
	}
	// The overview charts the last hour; keep two days of minutes.
	if _, err := storeStatsPrune(ctx, lead, e.clock.Now(), 48*time.Hour); err != nil && ctx.Err() == nil {
		e.log.Error("maintenance: prune job stats", "err", err)
	}
	e.runHooks(ctx)
	return true
}

// election is this replica's part in the maintenance election. On a
// pooled connection the leader held one of the pool's connections for as
// long as it led, and maintenance queued for a connection behind claims and
// pages whenever the pool was busy. The leader's session is silent for at
// most a lease: rescue may run on the pool (sensitive kinds rescue in a
// transaction of their own), and Elect pings it every beat.
func (e *Engine) election() *database.Election {
	return &database.Election{Pool: e.pool, Key: maintenanceLockKey, Silence: e.cfg.LeaseDuration,
		OnChange: func(leading bool) {
			e.leader.Store(leading)
			if leading {
				e.log.Info("became job maintenance leader")
			} else {
				// Its session is gone (or the engine stops): if it runs
				// on, it tries for the lock again at the next beat.
				e.log.Info("no longer the job maintenance leader")
			}
		}}
}

// IsLeader reports whether this engine currently runs maintenance.
func (e *Engine) IsLeader() bool { return e.leader.Load() }
