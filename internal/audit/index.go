package audit

import (
	"context"
	"fmt"
	"time"
)

// The name search's index (each named event's search text and the
// postings of its words) is written behind the sealer, not in its batch:
// writing it was most of a batch's time under load, and the sealing
// delay the log promises would have carried work that is no part of the
// log. A search finds an event the index does not cover yet by its text,
// through the queue while it is unsealed and through the leaves after the
// index's head once sealed (audit_search_ids), so it misses nothing in
// between; the indexer keeps that tail short.

// IndexResult says what one indexing pass did.
type IndexResult struct {
	Indexed int  // leaves the index now covers that it did not
	Backlog bool // some tenant had a full batch: more may be waiting
	Held    int  // tenants skipped: another indexer held their head
}

// IndexOnce indexes one batch of every tenant whose sealed events the
// name search's index has not covered for opts.IndexEvery, one tenant
// after another: none of it is on the sealing delay's path. Waiting
// gathers a batch the same size however many replicas' indexers look
// (each looking more often would index smaller batches, which cost more
// an event: the postings' index pages are descended once an event).
func (s *Sealer) IndexOnce(ctx context.Context) (IndexResult, error) {
	return s.index(ctx, s.opts.IndexEvery, s.share())
}

// index indexes one batch of every tenant of slot sl whose first sealed
// event past the index was sealed minWait ago or more, and of the other
// tenants' once it was sealed StealAfter before that.
func (s *Sealer) index(ctx context.Context, minWait time.Duration, sl slot) (IndexResult, error) {
	// Each a single statement, so none needs a transaction of its own.
	var res IndexResult
	q := newStore(s.db)
	tenants, err := q.searchWork(ctx, minWait, sl, s.opts.StealAfter)
	if err != nil {
		return res, fmt.Errorf("list tenants to index: %w", err)
	}
	var firstErr error
	for _, tenantID := range tenants {
		n, err := q.indexNext(ctx, tenantID, s.opts.IndexBatch)
		switch {
		case err != nil:
			// One tenant's failure must not stop the others' search.
			s.opts.Log.ErrorContext(ctx, "index audit events for search", "tenant_id", tenantID, "error", err.Error())
			if firstErr == nil {
				firstErr = fmt.Errorf("index audit events of tenant %d for search: %w", tenantID, err)
			}
		case n == 0:
			// Listed as behind, yet nothing taken: its head is held.
			res.Held++
		default:
			res.Indexed += n
			res.Backlog = res.Backlog || n == s.opts.IndexBatch
		}
	}
	return res, firstErr
}

// drainIndex indexes until the index covers every tree, waiting for a
// head another indexer holds as Drain waits for a held tree.
func (s *Sealer) drainIndex(ctx context.Context) error {
	for {
		res, err := s.index(ctx, 0, allTenants)
		if err != nil {
			return err
		}
		if res.Indexed > 0 {
			continue
		}
		if res.Held == 0 {
			return nil
		}
		if err := waitRetry(ctx); err != nil {
			return fmt.Errorf("drain the search index: %d tenants held by another indexer: %w", res.Held, err)
		}
	}
}

// Unindexed counts the sealed events, all tenants, that the name search's
// index does not cover yet (system pool): searches read those by their
// text, so a count that keeps growing is an indexer that does not keep up.
func Unindexed(ctx context.Context, system DB) (int64, error) {
	n, err := newStore(system).unindexed(ctx)
	if err != nil {
		return 0, fmt.Errorf("count audit events the search index does not cover: %w", err)
	}
	return n, nil
}
