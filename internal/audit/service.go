package audit

import (
	"context"
	"encoding/base64"
	"io"
	"math"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/inflight"
)

// Service is the audit trail's entry point for readers: every method opens
// its own transaction, tenant-scoped on the app pool for a tenant's pages
// (row-level security backs up each query's tenant filter) or on the
// system pool for staff. Writers record events with a Recorder inside
// their own business transaction instead.
type Service struct {
	app    database.SnapshotPool // jejak_app: one tenant at a time
	system database.SnapshotPool // jejak_system: staff, across tenants
	// verifier runs a tenant's verification once at a time and keeps its
	// result by head.
	verifier *Verifier
	vkey     string
	// exports counts each user's exports running in this process: per
	// process, not shared by replicas, so a user whose requests are spread
	// over N replicas may run up to N × ExportsPerUser.
	exports inflight.Counter
	// newestPages keeps each tenant's newest timeline page by version.
	newestPages *newestPages
}

// NewService returns a Service over the tenant-facing and the
// cross-tenant pool.
func NewService(app, system database.SnapshotPool) *Service {
	return &Service{app: app, system: system, verifier: NewVerifier(app), newestPages: newNewestPages()}
}

// UseVerifierKey sets the note verifier key of the log's checkpoints,
// which Verify checks every signature with and /audit/key publishes;
// call it before serving.
func (s *Service) UseVerifierKey(vkey string) {
	s.vkey = vkey
	s.verifier.verifierKey = vkey
}

// VerifierKey is the public note verifier key of the checkpoints ("" when
// none was set).
func (s *Service) VerifierKey() string { return s.vkey }

// TimelinePage is one page of a tenant's timeline, and the trail's newest
// event id when it was asked for (Head 0 otherwise).
type TimelinePage struct {
	Page
	Head int64
}

// Timeline returns one page of tenantID's events matching f, newest first,
// below event id beforeID (0 = the newest). With withHead it also reads
// the trail's newest id (one primary-key probe, in the same round trip),
// so a live poll can start there and never rescan the non-matching events
// between the newest match and the newest event.
func (s *Service) Timeline(ctx context.Context, tenantID int64, f Filter, beforeID int64, limit int, withHead bool) (TimelinePage, error) {
	var out TimelinePage
	if f.unfiltered() && beforeID <= 0 && !withHead {
		var err error
		out.Page, err = s.newest(ctx, tenantID, limit)
		return out, err
	}
	reads := []database.Read{func(db database.Querier) (err error) {
		out.Page, err = Timeline(ctx, db, tenantID, f, beforeID, limit)
		return err
	}}
	if withHead {
		reads = append(reads, func(db database.Querier) (err error) {
			if out.Head, err = newStore(db).lastID(ctx, tenantID); err != nil {
				return wrapf(err, "read newest audit event of tenant %d", tenantID)
			}
			return nil
		})
	}
	err := database.ReadTenantAll(ctx, s.app, tenantID, reads...)
	return out, err
}

// Poll returns tenantID's events after event id afterID matching f (see
// Newer).
func (s *Service) Poll(ctx context.Context, tenantID int64, f Filter, afterID int64, limit int) (events []Recorded, through int64, err error) {
	err = database.ReadTenant(ctx, s.app, tenantID, func(db database.Querier) (err error) {
		events, through, err = Newer(ctx, db, tenantID, f, afterID, limit)
		return err
	})
	return events, through, err
}

// Event returns one of tenantID's events by id, ErrNotFound when the
// tenant has none with that id (another tenant's id included): the
// timeline's newest event at or below id is that event when it is the
// tenant's.
func (s *Service) Event(ctx context.Context, tenantID, id int64) (Recorded, error) {
	if id <= 0 || id == math.MaxInt64 {
		return Recorded{}, ErrNotFound
	}
	var page Page
	err := database.ReadTenant(ctx, s.app, tenantID, func(db database.Querier) (err error) {
		page, err = Timeline(ctx, db, tenantID, Filter{}, id+1, 1)
		return err
	})
	if err != nil {
		return Recorded{}, err
	}
	if len(page.Rows) == 0 || page.Rows[0].ID != id {
		return Recorded{}, ErrNotFound
	}
	return page.Rows[0], nil
}

// EntityHistory returns one entity's name and events in tenantID, oldest
// first.
func (s *Service) EntityHistory(ctx context.Context, tenantID int64, entity, entityID string) (h History, err error) {
	err = database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) (err error) {
		h, err = EntityHistory(ctx, tx, tenantID, entity, entityID)
		return err
	})
	return h, err
}

// Export formats of Service.Export.
const (
	FormatCSV       = "csv"
	FormatJSONLines = "jsonl"
)

// Export streams tenantID's events matching f to w in format (FormatCSV or
// FormatJSONLines), oldest first, one short tenant-scoped transaction per
// batch: no transaction is open while w is written. userID (who asked)
// may run ExportsPerUser exports at once; past that ErrTooManyExports.
func (s *Service) Export(ctx context.Context, tenantID, userID int64, format string, f Filter, w io.Writer) error {
	release, ok := s.exports.Take(userID, ExportsPerUser)
	if !ok {
		return ErrTooManyExports
	}
	defer release()
	write := ExportCSV
	if format == FormatJSONLines {
		write = ExportJSONLines
	}
	return write(ctx, s.app, tenantID, f, w)
}

// Verify walks tenantID's log in one snapshot of the tenant-facing pool,
// at most once at a time per tenant; the result is reused until the tree
// grows (Verifier).
func (s *Service) Verify(ctx context.Context, tenantID int64) (VerifyResult, error) {
	return s.verifier.Verify(ctx, tenantID)
}

// VerifyAll walks every tenant's log through the system pool, each
// against its anchors kept outside the database (nil: none).
func (s *Service) VerifyAll(ctx context.Context, anchors map[int64][]AnchorPoint) ([]VerifyResult, error) {
	return VerifyAll(ctx, s.system, s.vkey, anchors)
}

// VerifyTenant walks one tenant's log through the system pool (the
// command line, where no tenant session exists), against anchors kept
// outside the database.
func (s *Service) VerifyTenant(ctx context.Context, tenantID int64, anchors []AnchorPoint) (VerifyResult, error) {
	return VerifyWith(ctx, s.system, tenantID, VerifyOptions{VerifierKey: s.vkey, Anchors: anchors})
}

// Checkpoint returns tenantID's latest signed checkpoint note.
func (s *Service) Checkpoint(ctx context.Context, tenantID int64) (note string, err error) {
	err = database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		cp, err := LatestCheckpoint(ctx, tx, tenantID)
		note = cp.Note
		return err
	})
	return note, err
}

// ProveInclusion proves leaf seq of tenantID against its latest checkpoint.
func (s *Service) ProveInclusion(ctx context.Context, tenantID, seq int64) (p InclusionProof, err error) {
	err = database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) (err error) {
		p, err = ProveInclusion(ctx, tx, tenantID, seq)
		return err
	})
	return p, err
}

// BacklogsRead lists the tenants whose events wait for the sealer, as one
// read on a system-pool Querier (for database.ReadAll): it stores them in
// out.
func (s *Service) BacklogsRead(ctx context.Context, out *[]Backlog) database.Read {
	return func(db database.Querier) (err error) {
		*out, err = Backlogs(ctx, db)
		return err
	}
}

// ProofBundle is "Prove this event": leaf seq's entry and its inclusion
// proof in the latest checkpoint's tree, read in one transaction.
func (s *Service) ProofBundle(ctx context.Context, tenantID, seq int64) (b ProofBundle, err error) {
	err = database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) error {
		p, err := ProveInclusion(ctx, tx, tenantID, seq)
		if err != nil {
			return err
		}
		entry, err := LeafEntry(ctx, tx, tenantID, seq)
		if err != nil {
			return err
		}
		b = p.Bundle()
		b.Entry = base64.StdEncoding.EncodeToString(entry)
		return nil
	})
	return b, err
}

// ProveConsistency proves tenantID's tree of size to extends size from.
func (s *Service) ProveConsistency(ctx context.Context, tenantID, from, to int64) (hashes []tlog.Hash, err error) {
	err = database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) (err error) {
		hashes, err = ProveConsistency(ctx, tx, tenantID, from, to)
		return err
	})
	return hashes, err
}

// LeafEntry returns the canonical encoding of tenantID's leaf seq.
func (s *Service) LeafEntry(ctx context.Context, tenantID, seq int64) (entry []byte, err error) {
	err = database.InTenantTx(ctx, s.app, tenantID, func(tx pgx.Tx) (err error) {
		entry, err = LeafEntry(ctx, tx, tenantID, seq)
		return err
	})
	return entry, err
}

// Search finds events by trace id or job id across tenants (staff
// forensics, system pool), newest first.
func (s *Service) Search(ctx context.Context, q SearchQuery, beforeID int64, limit int) (Page, error) {
	return Search(ctx, s.system, q, beforeID, limit)
}
