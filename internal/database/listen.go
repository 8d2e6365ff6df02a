package database

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Listen calls wake once LISTEN on channel is in place and again on every
// notification, until ctx ends. A lost connection is logged and retried
// after retry; wake is also called on each (re)connect, because anything
// sent while nobody listened was missed. NOTIFY is only a wake-up: callers
// keep polling as the ground truth.
//
// The listening session is a connection of its own (OwnConn), not one of
// pool's: it waits for as long as the process runs, and a replica runs
// three listeners (the job and delivery engines, the relay) beside the
// maintenance leader's session, so on pooled connections they took all
// of a four-connection pool and nothing else ever ran.
func Listen(ctx context.Context, pool *pgxpool.Pool, channel string, retry time.Duration, log *slog.Logger, wake func()) {
	for ctx.Err() == nil {
		if err := listenOnce(ctx, pool, channel, wake); err != nil && ctx.Err() == nil {
			log.Warn("notifications lost; reconnecting", "channel", channel, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(retry):
			}
		}
	}
}

func listenOnce(ctx context.Context, pool *pgxpool.Pool, channel string, wake func()) error {
	conn, err := OwnConn(ctx, pool)
	if err != nil {
		return err
	}
	defer CloseOwn(conn)
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		wake()
	}
}

// OwnConn opens a connection outside pool as the pool opens its own (login
// role, session limits, planner settings, type codecs), for a session held
// for long stretches (a listener, a heartbeat, the maintenance leader's)
// that must neither take one of the pool's connections from the
// statements nor wait behind them for one. The caller closes it.
func OwnConn(ctx context.Context, pool *pgxpool.Pool) (*pgx.Conn, error) {
	cfg := pool.Config()
	c, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if cfg.AfterConnect != nil {
		if err := cfg.AfterConnect(ctx, c); err != nil {
			CloseOwn(c)
			return nil, err
		}
	}
	return c, nil
}

// CloseOwn closes a connection OwnConn opened, waiting at most a second
// for the server to hear of it: the session ends either way.
func CloseOwn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// How a claim loop rests between claims (see Sleeper).
const (
	// WarmFor is how long a loop stays awake after its last sign of work
	// (a claim that took rows, or a wake-up) before it marks itself
	// asleep. While it is awake, inserts on its channel do not NOTIFY,
	// so their commits do not queue on the NOTIFY lock.
	WarmFor = 100 * time.Millisecond
	// WarmPoll is how often an awake loop with nothing due claims (at
	// most its poll interval): the delay of a job or message inserted by
	// another process while the loop is warm.
	WarmPoll = 10 * time.Millisecond
	// wakeLockKey is the advisory lock (classid; objid is hashtext of the
	// channel) of db/schema/00090_wake_listeners.sql.
	wakeLockKey = 727278
)

// SleeperConfig configures a Sleeper.
type SleeperConfig struct {
	// Pool is the cross-tenant pool (jejak_system may write
	// wake_listeners).
	Pool *pgxpool.Pool
	// Channel is the NOTIFY channel the loop LISTENs on ("jejak_jobs",
	// "jejak_outbox").
	Channel string
	// Listener names the loop in wake_listeners, unique per channel.
	Listener string
	// Poll is the loop's fallback poll interval while asleep.
	Poll time.Duration
	// WarmFor and WarmPoll override the package's defaults when positive;
	// WarmFor < 0 marks the loop asleep as soon as nothing is due.
	WarmFor, WarmPoll time.Duration
	// Log receives failures to update the mark.
	Log *slog.Logger
}

// Sleeper keeps one claim loop's row in wake_listeners, which tells the
// insert triggers of its channel whether a NOTIFY is needed (db/schema/
// 00090_wake_listeners.sql): they notify only while some loop is marked
// asleep. After each claim the loop calls Next, which marks or unmarks it
// and says how long to wait for a wake-up before claiming again:
//
//   - while claims keep finding work, or wake-ups come closer together
//     than WarmFor, the loop is awake (unmarked): inserts do not notify, and
//     the loop claims every WarmPoll when nothing is due;
//   - after WarmFor without work it marks itself asleep, waits for the
//     inserts that saw it awake to end, claims once more, and then waits
//     for a NOTIFY or its poll interval.
//
// So a job inserted at any moment is claimed by the next claim of some
// loop, without relying on the poll. A Sleeper belongs to one goroutine;
// only Asleep may be called from others.
type Sleeper struct {
	pool     *pgxpool.Pool
	channel  string
	listener string
	poll     time.Duration
	warmFor  time.Duration
	warmPoll time.Duration
	ttl      time.Duration
	log      *slog.Logger

	asleep   atomic.Bool // the row says asleep (as far as this loop knows)
	settled  bool        // inserts that saw the loop awake have ended since it marked itself
	markedAt time.Time   // when the row was last written asleep
	woken    bool        // a wake-up arrived since the last claim
	again    bool        // and another one during it
	last     time.Time   // the last claim that followed a wake-up or took work
	prev     time.Time   // the one before
}

// NewSleeper returns the Sleeper of one claim loop, awake: inserts on the
// channel do not notify on its account until it marks itself asleep.
func NewSleeper(cfg SleeperConfig) *Sleeper {
	// Starting counts as a sign of work: a loop starts warm (there may be
	// a backlog), and marks itself asleep WarmFor after, if idle.
	s := &Sleeper{pool: cfg.Pool, channel: cfg.Channel, listener: cfg.Listener, poll: cfg.Poll,
		warmFor: WarmFor, warmPoll: WarmPoll, log: cfg.Log, last: time.Now()} //nolint:forbidigo // local pacing
	if cfg.WarmFor != 0 {
		s.warmFor = max(cfg.WarmFor, 0)
	}
	if cfg.WarmPoll > 0 {
		s.warmPoll = cfg.WarmPoll
	}
	s.warmPoll = min(s.warmPoll, s.poll)
	if s.log == nil {
		s.log = slog.Default()
	}
	// A sleeping loop rewrites its row every poll; a row not rewritten for
	// three polls (and a margin for a slow database) belongs to a loop
	// that is gone.
	s.ttl = 3*s.poll + 10*time.Second
	return s
}

// Asleep reports whether the loop is marked asleep, so inserts on its
// channel NOTIFY it.
func (s *Sleeper) Asleep() bool { return s.asleep.Load() }

// Woken records that a wake-up (a NOTIFY, or a local wake) arrived.
func (s *Sleeper) Woken() { s.woken = true }

// Again records that another wake-up arrived while the loop was claiming:
// rows keep coming, however long the claim took, so an asleep loop marks
// itself awake (the NOTIFYs would go on otherwise).
func (s *Sleeper) Again() { s.again = true }

// Next takes the outcome of the claim just made: how many rows it took,
// whether more are due at once (a full batch), and its error. It updates
// the loop's mark and returns how long to wait for a wake-up before the
// next claim; 0 means claim at once.
func (s *Sleeper) Next(ctx context.Context, took int, more bool, err error) time.Duration {
	if ctx.Err() != nil {
		// Stopping: nothing below could reach the database; the caller's
		// wait sees ctx end.
		return s.poll
	}
	now := time.Now() //nolint:forbidigo // local pacing, not domain time
	active := s.woken || took > 0
	again := s.again && active
	s.woken, s.again = false, false
	if active {
		s.prev, s.last = s.last, now
	}
	if err != nil {
		return s.poll
	}
	if more {
		s.rouse(ctx)
		return 0
	}
	if s.asleep.Load() {
		if again || (active && now.Sub(s.prev) < s.warmFor) {
			// Work is arriving faster than WarmFor: stop the NOTIFYs
			// (also before settling: an awake loop needs no settling).
			s.rouse(ctx)
			return s.warmPoll
		}
		if !s.settled {
			// Until every insert that saw the loop awake has ended, the
			// loop claims as an awake one does: such an insert sent no
			// NOTIFY, so only a claim finds its row.
			if s.settled = s.settle(ctx); s.settled {
				return 0 // the claim that sees their rows
			}
			return s.warmPoll
		}
		if now.Sub(s.markedAt) >= s.ttl/3 {
			if !s.mark(ctx) {
				return s.poll
			}
			if !s.settled { // the row was gone: inserts saw the loop awake
				s.settled = s.settle(ctx)
				return 0
			}
		}
		return s.poll
	}
	if now.Sub(s.last) < s.warmFor {
		return s.warmPoll
	}
	if !s.mark(ctx) {
		// Still awake as far as inserts know; the poll bounds the wait.
		return s.poll
	}
	if !s.settled {
		s.settled = s.settle(ctx)
	}
	return 0 // the claim after the mark
}

// mark writes the row asleep (or refreshes it) and reports whether that
// worked. When the row did not say asleep before, the loop is not settled.
func (s *Sleeper) mark(ctx context.Context) bool {
	var was bool
	err := s.pool.QueryRow(ctx, `WITH prev AS (
			SELECT asleep FROM wake_listeners WHERE channel = $1 AND listener = $2
		), up AS (
			INSERT INTO wake_listeners (channel, listener, asleep, expires_at)
			VALUES ($1, $2, true, now() + make_interval(secs => $3))
			ON CONFLICT (channel, listener) DO UPDATE SET asleep = true, expires_at = excluded.expires_at
		)
		SELECT coalesce((SELECT asleep FROM prev), false)`,
		s.channel, s.listener, s.ttl.Seconds()).Scan(&was)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("mark claim loop asleep", "channel", s.channel, "err", err)
		}
		return false
	}
	s.markedAt = time.Now() //nolint:forbidigo // local pacing, not domain time
	if !was || !s.asleep.Load() {
		s.settled = false
	}
	s.asleep.Store(true)
	return true
}

// settle reports whether every transaction that inserted on the channel
// while it saw no loop asleep has ended (then the next claim sees their
// rows). It only tries the lock those inserts hold shared: a request that
// waited would queue every later insert of the channel behind it (a
// shared request does not pass a waiting exclusive one), and with inserts
// that overlap without pause, as under a steady load of long transactions,
// it would hold every writer of the channel up for as long as it waited,
// again and again.
func (s *Sleeper) settle(ctx context.Context) bool {
	var ok bool
	err := s.pool.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1, hashtext($2))", wakeLockKey, s.channel).Scan(&ok)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("check for inserts before sleeping", "channel", s.channel, "err", err)
		}
		return false
	}
	return ok
}

// Busy marks the loop awake while it cannot claim (every worker slot
// taken): a NOTIFY could not make it claim sooner, and it claims again,
// and marks itself asleep before it sleeps, once a slot frees.
func (s *Sleeper) Busy(ctx context.Context) { s.rouse(ctx) }

// rouse marks the loop awake, if it is marked asleep.
func (s *Sleeper) rouse(ctx context.Context) {
	if !s.asleep.Load() {
		return
	}
	if _, err := s.pool.Exec(ctx, "UPDATE wake_listeners SET asleep = false WHERE channel = $1 AND listener = $2",
		s.channel, s.listener); err != nil {
		// Left asleep as far as this loop knows, though the update may
		// have committed: rewrite the mark at the next chance (mark then
		// sees whether the row still said asleep).
		if ctx.Err() == nil {
			s.log.Warn("mark claim loop awake", "channel", s.channel, "err", err)
		}
		s.markedAt = time.Time{}
		return
	}
	s.asleep.Store(false)
}

// Forget deletes the loop's row (the loop is stopping).
func (s *Sleeper) Forget(ctx context.Context) {
	if _, err := s.pool.Exec(ctx, "DELETE FROM wake_listeners WHERE channel = $1 AND listener = $2",
		s.channel, s.listener); err != nil {
		s.log.Warn("remove claim loop from wake_listeners", "channel", s.channel, "err", err)
	}
	s.asleep.Store(false)
}

// PruneSleepers deletes the rows of claim loops that stopped rewriting
// them (their process died while they were asleep): each one makes every
// insert on its channel NOTIFY.
func PruneSleepers(ctx context.Context, db Querier) (int64, error) {
	tag, err := db.Exec(ctx, "DELETE FROM wake_listeners WHERE expires_at < now()")
	if err != nil {
		return 0, fmt.Errorf("prune wake_listeners: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Local wake-ups: a claim loop of this process need not wait for its warm
// poll to see what a transaction of the same process inserted. An awake
// loop gets no NOTIFY (that is the point), so the inserting code asks
// WakeAfterCommit, and InTx, once the transaction has committed (its rows
// are visible to the loop's next claim), wakes the loops registered with
// WakeLocal for that database and channel.

type wakeKey struct {
	host     string
	port     uint16
	database string
	channel  string
}

var (
	localMu     sync.Mutex
	localWakers = map[wakeKey]map[*func()]struct{}{}
	// pending holds, per transaction begun by InTx, the channels to wake
	// at its commit.
	pending sync.Map // pgx.Tx → *commitWakes
)

type commitWakes struct {
	mu       sync.Mutex
	channels []string
}

// WakeLocal calls wake after each commit, through InTx on pool's database,
// of a transaction that called WakeAfterCommit for channel. The returned
// function unregisters it.
func WakeLocal(pool *pgxpool.Pool, channel string, wake func()) (unregister func()) {
	cc := pool.Config().ConnConfig
	k := wakeKey{cc.Host, cc.Port, cc.Database, channel}
	f := &wake
	localMu.Lock()
	if localWakers[k] == nil {
		localWakers[k] = map[*func()]struct{}{}
	}
	localWakers[k][f] = struct{}{}
	localMu.Unlock()
	return func() {
		localMu.Lock()
		delete(localWakers[k], f)
		if len(localWakers[k]) == 0 {
			delete(localWakers, k)
		}
		localMu.Unlock()
	}
}

// WakeAfterCommit asks for this process's claim loops on channel to be
// woken once tx commits. It does nothing unless tx was begun by InTx (a
// transaction the caller began itself, or a savepoint, is left to the
// NOTIFY and the loops' polling).
func WakeAfterCommit(tx Querier, channel string) {
	if a, ok := tx.(atCommit); ok {
		// A statement queued for the COMMIT belongs to its transaction.
		tx = a.commitTx
	}
	ptx, ok := tx.(pgx.Tx)
	if !ok {
		return
	}
	v, ok := pending.Load(ptx)
	if !ok {
		return
	}
	w := v.(*commitWakes)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.Contains(w.channels, channel) {
		w.channels = append(w.channels, channel)
	}
}

// trackCommit starts collecting WakeAfterCommit calls for tx; the returned
// function stops, and wakes the loops when committed is true.
func trackCommit(tx pgx.Tx) (done func(committed bool)) {
	w := &commitWakes{}
	pending.Store(tx, w)
	return func(committed bool) {
		pending.Delete(tx)
		w.mu.Lock()
		channels := w.channels
		w.mu.Unlock()
		if !committed || len(channels) == 0 {
			return
		}
		cc := tx.Conn().Config()
		var wakes []func()
		localMu.Lock()
		for _, ch := range channels {
			for f := range localWakers[wakeKey{cc.Host, cc.Port, cc.Database, ch}] {
				wakes = append(wakes, *f)
			}
		}
		localMu.Unlock()
		for _, wake := range wakes {
			wake()
		}
	}
}
