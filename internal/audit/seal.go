package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
)

// SignedCheckpoint is a checkpoint the sealer signed, for the sink that
// keeps copies outside the database (the anchor file).
type SignedCheckpoint struct {
	TenantID int64
	Slug     string
	Size     int64
	Root     []byte
	Note     string
}

// CheckpointSink keeps signed checkpoints outside the database. It is
// called after the checkpoints committed.
type CheckpointSink interface {
	AppendCheckpoints(cps []SignedCheckpoint) error
}

// SealerOptions tunes a Sealer; zero values take defaults.
type SealerOptions struct {
	// Signer signs checkpoints; nil seals without signing (tests of the
	// tree alone).
	Signer *LogSigner
	// Sink, when set, receives every checkpoint after it committed.
	Sink CheckpointSink
	// Batch is the most events sealed per tenant per transaction
	// (default 2000).
	Batch int
	// SignEvery is the least time between two checkpoints of one tenant
	// (default 1s): a busy tenant's tree grows many times a second, and
	// one checkpoint a second is what witnesses and anchors need.
	SignEvery time.Duration
	// OnSealed, when set, is told how long each sealed event waited in
	// the queue (from its transaction's start to its sealing commit). It
	// may be called from several goroutines at once.
	OnSealed func(delays []time.Duration)
	// IndexBatch is the most leaves indexed for the name search per
	// tenant per transaction (default 5000).
	IndexBatch int
	// IndexEvery is how long sealed events wait for the name search's
	// index (default 500ms): the indexer takes a tenant's once the first
	// has waited that long (Run looks four times as often). A search
	// reads the events the index does not cover by their text, so this
	// bounds that tail; waiting gathers the indexer's batches, which cost
	// less an event the larger they are.
	IndexEvery time.Duration
	// Parallel is how many tenants one pass seals at once (default
	// DefaultSealParallel).
	// A tenant's batch is a handful of round trips and a commit: one at a
	// time, a pass over ten busy tenants took seconds on a loaded
	// database, and every tenant's events waited that long.
	Parallel int
	// Slot, when set, names this sealer's share of the tenants among the
	// replicas' (the job engine's: members and this replica's rank): it
	// seals and indexes the tenants whose id modulo members is rank, and
	// the others' only once their first event has waited StealAfter (their
	// replica is gone or behind). Every replica sealing every tenant took
	// each tenant's events in four replicas' smaller batches, each paying
	// a batch's fixed cost. nil: every tenant. It must answer members ≥ 1
	// and 0 ≤ rank < members, as job.Engine.Slot does.
	Slot func() (members, rank int)
	// StealAfter is how long another replica's tenant's first event waits
	// before this sealer takes it (default 2s), and how much longer than
	// IndexEvery its sealed events wait for this indexer.
	StealAfter time.Duration
	Log        *slog.Logger
}

// slot is a sealer's share of the tenants: those whose id modulo members
// is rank.
type slot struct{ members, rank int }

// allTenants is the slot of a sealer alone.
var allTenants = slot{members: 1}

// share is the sealer's slot now: every tenant without SealerOptions.Slot.
func (s *Sealer) share() slot {
	if s.opts.Slot == nil {
		return allTenants
	}
	m, r := s.opts.Slot()
	return slot{members: m, rank: r}
}

// DefaultSealParallel is SealerOptions.Parallel's default.
const DefaultSealParallel = 4

// Sealer orders and integrates: it takes each tenant's committed, unsealed
// events in batches under one lock on the tenant's tree row, gives them
// the next seqs, appends them as leaves and signs checkpoints. Any number
// of sealers may run (one per replica, each its share of the tenants
// first: SealerOptions.Slot): a tenant's tree row is locked with SKIP
// LOCKED, so one sealer at a time works on a tenant and the others move on
// to other tenants; a sealer killed mid-batch rolls back whole.
type Sealer struct {
	db   database.Pool // jejak_system
	opts SealerOptions
}

// NewSealer returns a Sealer over the system pool.
func NewSealer(system database.Pool, opts SealerOptions) *Sealer {
	if opts.Batch <= 0 {
		opts.Batch = 2000
	}
	if opts.SignEvery <= 0 {
		opts.SignEvery = time.Second
	}
	if opts.IndexBatch <= 0 {
		opts.IndexBatch = 5000
	}
	if opts.IndexEvery <= 0 {
		opts.IndexEvery = 500 * time.Millisecond
	}
	if opts.StealAfter <= 0 {
		opts.StealAfter = 2 * time.Second
	}
	if opts.Parallel <= 0 {
		opts.Parallel = DefaultSealParallel
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Sealer{db: system, opts: opts}
}

// ErrForeignKey is CheckKey's answer when the database's logs are signed
// with another key than the sealer's.
var ErrForeignKey = errors.New("the database's audit checkpoints are signed with another log key")

// CheckKey returns ErrForeignKey unless this sealer's key is the
// database's log key: the key that signed the newest checkpoint, of any
// tenant, and the one the first sealer to start claimed (audit_log_key;
// claimed here when no sealer has yet). Sealers that sign with different
// keys would leave each tenant's log under several keys: no verifier
// holding the one published key (each replica would publish its own)
// accepts them, and a witness would report the key changing.
func (s *Sealer) CheckKey(ctx context.Context) error {
	if s.opts.Signer == nil {
		return nil
	}
	q := newStore(s.db)
	tenantID, size, signed, ok, err := q.newestCheckpoint(ctx)
	if err != nil {
		return err
	}
	if ok {
		if _, err := OpenCheckpoint([]byte(signed), s.VerifierKey(), ""); err != nil {
			return fmt.Errorf("%w: tenant %d's checkpoint of size %d does not verify with key %s (%v)", ErrForeignKey, tenantID, size, s.VerifierKey(), err)
		}
	}
	claimed, err := q.claimKey(ctx, s.VerifierKey())
	if err != nil {
		return err
	}
	if claimed != s.VerifierKey() {
		return fmt.Errorf("%w: the database's logs are signed with key %s, not %s", ErrForeignKey, claimed, s.VerifierKey())
	}
	return nil
}

// VerifierKey is the key that verifies this sealer's checkpoints ("" when
// it does not sign).
func (s *Sealer) VerifierKey() string {
	if s.opts.Signer == nil {
		return ""
	}
	return s.opts.Signer.VerifierKey()
}

// SealResult says what one pass did.
type SealResult struct {
	Sealed  int  // events sealed
	Signed  int  // checkpoints signed
	Backlog bool // some tenant had a full batch: more may be waiting
	Held    int  // tenants skipped: another sealer held their tree
}

// errTreeHeld: another sealer holds the tenant's tree (it is sealing the
// tenant now, or its transaction has not ended yet).
var errTreeHeld = errors.New("another sealer holds the tree")

// SealOnce seals one batch of every tenant with work and signs the
// checkpoints that are due; force signs every grown tree now, whatever
// SignEvery says.
func (s *Sealer) SealOnce(ctx context.Context, force bool) (SealResult, error) {
	var res SealResult
	// One statement: no transaction of its own.
	// Drain (force) seals everything, whoever's.
	sl := s.share()
	if force {
		sl = allTenants
	}
	tenants, err := newStore(s.db).sealWork(ctx, sl, s.opts.StealAfter)
	if err != nil {
		return res, fmt.Errorf("list tenants to seal: %w", err)
	}
	// Oldest tenants first (the list's order), so a pass is the same
	// every time; each tenant's outcome is kept in its place and tallied
	// in that order once all are done.
	outcomes := s.sealTenants(ctx, tenants, force)
	var cps []SignedCheckpoint
	var firstErr error
	for i, o := range outcomes {
		if o.err != nil {
			// One tenant's failure must not stop the others' logs.
			s.opts.Log.ErrorContext(ctx, "seal audit events", "tenant_id", tenants[i].TenantID, "error", o.err.Error())
			firstErr = cmp.Or(firstErr, o.err)
		}
		if o.held {
			res.Held++
		}
		res.Sealed += o.n
		res.Backlog = res.Backlog || o.full
		res.Signed += len(o.cps)
		cps = append(cps, o.cps...)
	}
	if len(cps) > 0 && s.opts.Sink != nil {
		if err := s.opts.Sink.AppendCheckpoints(cps); err != nil {
			s.opts.Log.ErrorContext(ctx, "append audit checkpoints to the anchors", "error", err.Error())
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	return res, firstErr
}

// sealOutcome is what a pass did for one listed tenant.
type sealOutcome struct {
	n    int
	full bool // a batch was full: more may be waiting
	cps  []SignedCheckpoint
	err  error
	held bool
}

// sealTenants seals the listed tenants, opts.Parallel at a time, and
// returns each one's outcome in the list's order.
func (s *Sealer) sealTenants(ctx context.Context, tenants []sealTarget, force bool) []sealOutcome {
	outcomes := make([]sealOutcome, len(tenants))
	// A tenant sealed while another of the pass is still in its first
	// batch is sealed again at once if it had events, instead of waiting
	// for the slowest tenant and the next pass's list: on a busy machine a
	// batch takes a few hundred milliseconds, and every other tenant's
	// next batch waited for the pass's slowest. Repeats start only once
	// every listed tenant has started, so none waits for another's.
	var mu sync.Mutex
	started, firstDone := 0, 0
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if started == len(tenants) {
			return 0, false
		}
		started++
		return started - 1, true
	}
	again := func(first bool) bool {
		mu.Lock()
		defer mu.Unlock()
		if first {
			firstDone++
		}
		return started == len(tenants) && firstDone < len(tenants)
	}
	var wg sync.WaitGroup
	for range min(s.opts.Parallel, len(tenants)) {
		wg.Go(func() {
			for i, ok := take(); ok; i, ok = take() {
				o, work := &outcomes[i], tenants[i]
				for first := true; ; first = false {
					n, cp, err := s.sealTenant(ctx, work, force)
					switch {
					case errors.Is(err, errTreeHeld):
						o.held = o.held || first
					case err != nil:
						o.err = cmp.Or(o.err, err)
					default:
						o.n += n
						o.full = o.full || n == s.opts.Batch
						if cp != nil {
							o.cps = append(o.cps, *cp)
						}
					}
					work.HasTree = work.HasTree || err == nil
					if more := again(first); !more || err != nil || n == 0 || ctx.Err() != nil {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	return outcomes
}

// Drain seals until no event waits and signs a checkpoint of every grown
// tree, then indexes every sealed event for the name search (tests, the
// command line, a migration). A tenant another sealer holds is looked at
// again until it is free or sealed: that sealer may be a replica's, or one
// cancelled whose transaction the server has not ended yet, and the
// tenant's events still wait.
func (s *Sealer) Drain(ctx context.Context) error {
	for {
		res, err := s.SealOnce(ctx, true)
		if err != nil {
			return err
		}
		if res.Held > 0 && res.Sealed == 0 && res.Signed == 0 {
			if err := waitRetry(ctx); err != nil {
				return fmt.Errorf("drain the audit log: %d tenants held by another sealer: %w", res.Held, err)
			}
			continue
		}
		if res.Sealed == 0 && res.Signed == 0 {
			return s.drainIndex(ctx)
		}
	}
}

// waitRetry waits before Drain looks again at a tenant another sealer or
// indexer holds: their transactions are one batch long.
func waitRetry(ctx context.Context) error { return clock.Sleep(ctx, 10*time.Millisecond) }

// Run seals every poll and indexes for the name search every quarter of
// opts.IndexEvery until ctx ends, each at once again while a backlog
// remains. The indexer runs beside the sealer, so a pass of either never
// waits for the other.
func (s *Sealer) Run(ctx context.Context, poll time.Duration) {
	var wg sync.WaitGroup
	wg.Go(func() {
		repeat(ctx, s.opts.IndexEvery/4, func() (bool, error) {
			res, err := s.IndexOnce(ctx)
			return res.Backlog, err
		})
	})
	repeat(ctx, poll, func() (bool, error) {
		res, err := s.SealOnce(ctx, false)
		return res.Backlog, err
	})
	wg.Wait()
}

// repeat starts pass every poll until ctx ends, at once again after a
// pass that left a backlog and did not fail. The poll counts from a pass's
// start: a pass that took longer is followed at once, so under load a
// tenant waits one pass for its next batch, not a pass and a poll.
func repeat(ctx context.Context, poll time.Duration, pass func() (backlog bool, err error)) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		started := time.Now()
		backlog, err := pass()
		if err != nil && ctx.Err() != nil {
			return
		}
		if backlog && err == nil {
			t.Reset(0)
		} else {
			t.Reset(max(0, poll-time.Since(started)))
		}
	}
}

// sealable is one event about to become a leaf.
type sealable struct {
	fields   chainFields
	queuedAt time.Time
}

// sealTenant seals one batch of a listed tenant's events in one
// transaction and signs a checkpoint when due. It returns errTreeHeld
// without waiting when another sealer holds the tenant's tree.
func (s *Sealer) sealTenant(ctx context.Context, work sealTarget, force bool) (int, *SignedCheckpoint, error) {
	tenantID := work.TenantID
	var n int
	var cp *SignedCheckpoint
	var delays []time.Duration
	err := database.InTx(ctx, s.db, func(tx pgx.Tx) error {
		q := newStore(tx)
		tree, ok, err := lockTree(ctx, q, tenantID, work.HasTree)
		if err != nil {
			return err
		}
		if !ok {
			return errTreeHeld
		}
		// The batch is read with a plan for the queue and trail as they
		// are now: a generic plan cached while they were small (or never
		// analyzed) can walk the whole trail for every batch.
		batch, edge, err := s.pending(ctx, newFilteredStore(tx), tenantID, tree)
		if err != nil {
			return err
		}
		w := sealWrite{TenantID: tenantID, Zone: tree.TimeZone, Size: tree.Size, Root: tree.Root}
		if len(batch) > 0 {
			if err := s.integrate(ctx, q, tree, batch, edge, &w); err != nil {
				return err
			}
			n = len(batch)
			for i := range batch {
				if !batch[i].fields.V1 {
					delays = append(delays, tree.Now.Sub(batch[i].queuedAt))
				}
			}
		}
		if s.opts.Signer != nil && w.Size != tree.SignedSize && (force || tree.Now.Sub(tree.SignedAt) >= s.opts.SignEvery) {
			// Signed before it is written: the root is known, and the
			// checkpoint goes with the batch in one statement.
			if w.Note, err = s.opts.Signer.Sign(Origin(tree.Slug), w.Size, w.Root); err != nil {
				return fmt.Errorf("sign checkpoint: %w", err)
			}
			cp = &SignedCheckpoint{TenantID: tenantID, Slug: tree.Slug, Size: w.Size, Root: w.Root, Note: w.Note}
		}
		if n == 0 && cp == nil {
			return nil
		}
		// Sent with the COMMIT: its errors (every queued event must move)
		// fail the commit, which rolls the batch back whole.
		if err := newStore(database.AtCommit(tx)).seal(ctx, w); err != nil {
			return fmt.Errorf("write sealed batch: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("seal audit log of tenant %d: %w", tenantID, err)
	}
	if len(delays) > 0 && s.opts.OnSealed != nil {
		s.opts.OnSealed(delays)
	}
	return n, cp, nil
}

// lockTree locks tenantID's tree row, creating the empty tree first when
// the pass's list found none; ok is false when another sealer holds it.
// Only a missing tree is created: an insert, even one that inserts
// nothing, waits for a sealer that has grown the row in its open
// transaction (the row's new version is not committed yet).
func lockTree(ctx context.Context, q store, tenantID int64, exists bool) (logTree, bool, error) {
	if !exists {
		var empty tlog.Hash
		if err := q.createTree(ctx, tenantID, empty[:]); err != nil {
			return logTree{}, false, fmt.Errorf("create tree: %w", err)
		}
	}
	tree, ok, err := q.lockTree(ctx, tenantID)
	if err != nil {
		return tree, false, fmt.Errorf("lock tree: %w", err)
	}
	return tree, ok, nil
}

// pending reads the next batch: the migrated v1 chain first, in its seq
// order, then queued events in id order, the latter with the right edge
// of the tree (all that integrate needs of the tree before the batch) in
// the same statement.
func (s *Sealer) pending(ctx context.Context, q store, tenantID int64, tree logTree) ([]sealable, map[int64][]byte, error) {
	if tree.Size < tree.V1Size {
		out, seqs, err := q.v1Batch(ctx, tenantID, tree.Size, int(min(int64(s.opts.Batch), tree.V1Size-tree.Size)))
		if err != nil {
			return nil, nil, fmt.Errorf("read v1 events: %w", err)
		}
		for i := range out {
			if seqs[i] != tree.Size+int64(i)+1 {
				return nil, nil, fmt.Errorf("v1 chain has a gap before event %d (tree size %d)", out[i].fields.ID, tree.Size+int64(i))
			}
		}
		if len(out) == 0 {
			return nil, nil, fmt.Errorf("v1 chain ends at %d, its head says %d", tree.Size, tree.V1Size)
		}
		return out, nil, nil
	}
	out, edge, err := q.unsealedBatch(ctx, tenantID, s.opts.Batch, edgeSeqs(tree.Size))
	if err != nil {
		return nil, nil, fmt.Errorf("read queued events: %w", err)
	}
	return out, edge, nil
}

// integrate appends batch to the tree after tree.Size, whose right edge's
// leaves (edgeSeqs) hold the stored hashes in edge when pending read them:
// it gives the events their seqs and fills w with the leaves, the queued
// events to move, and the tree's new size and root.
func (s *Sealer) integrate(ctx context.Context, q store, tree logTree, batch []sealable, edge map[int64][]byte, w *sealWrite) error {
	th := newTreeHashes(ctx, q, w.TenantID)
	for seq, hashes := range edge {
		th.remember(seq-1, hashes)
	}
	// Reads the edge only when it did not come with the batch.
	if err := th.readEdge(tree.Size); err != nil {
		return err
	}
	for i := range batch {
		f := &batch[i].fields
		n := tree.Size + int64(i)
		f.Seq = n + 1
		stored, err := tlog.StoredHashesForRecordHash(n, tlog.RecordHash(f.encode()), th)
		if err != nil {
			return fmt.Errorf("hash leaf %d: %w", f.Seq, err)
		}
		hash := joinHashes(stored)
		th.remember(n, hash)
		w.Seqs = append(w.Seqs, f.Seq)
		w.LeafEventIds = append(w.LeafEventIds, f.ID)
		w.Hashes = append(w.Hashes, hash)
		if !f.V1 {
			// v1 events are in audit_sealed, and were counted by day
			// when they were recorded.
			w.QueuedIds = append(w.QueuedIds, f.ID)
		}
	}
	w.Size = tree.Size + int64(len(batch))
	root, err := tlog.TreeHash(w.Size, th)
	if err != nil {
		return fmt.Errorf("tree root: %w", err)
	}
	w.Root = root[:]
	return nil
}

// SealingBehind is the sealing delay past which the log breaks its promise
// (events are sealed within a second or two): the staff overview flags a
// tenant whose oldest unsealed event is older, as the alert rule
// JejakAuditSealingBehind does.
const SealingBehind = 30 * time.Second

// Backlog is one tenant's events waiting for the sealer.
type Backlog struct {
	TenantID int64
	Events   int64
	Oldest   time.Time
}

// Backlogs lists the tenants with unsealed events (system pool): one
// statement, which needs no transaction of its own.
func Backlogs(ctx context.Context, system database.Querier) ([]Backlog, error) {
	out, err := newStore(system).backlogs(ctx)
	if err != nil {
		return nil, fmt.Errorf("read audit seal backlog: %w", err)
	}
	return out, nil
}
