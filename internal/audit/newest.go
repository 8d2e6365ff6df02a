package audit

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/keyset"
)

// timelineVersion is what a tenant's newest timeline page depends on
// (AuditTimelineVersion): equal versions, equal pages.
type timelineVersion struct{ size, unsealed int64 }

// newestPages keeps each tenant's newest unfiltered timeline page, the
// page owners read most, under the version it was read at. A request then
// reads the version (two index probes) instead of the page: fifty events,
// their leaves and their actors' names were most of PostgreSQL's work on
// the trail. An event's row and leaf never change once visible, so a page
// read at a version is the page for as long as the version holds. The
// names it carries are the users' names, which Jejak never changes; maxAge
// bounds how long a change made outside it (a superuser's UPDATE) waits
// for the tenant's next event.
type newestPages struct {
	mu     sync.Mutex
	m      map[int64]newestPage
	bytes  int // the pages' approximate size in memory
	now    func() time.Time
	maxAge time.Duration
	// updates counts the pages brought up to date rather than read again.
	updates atomic.Int64
}

type newestPage struct {
	ver    timelineVersion
	limit  int
	readAt time.Time
	page   Page
	bytes  int
}

// The pages kept are bounded in number and in memory (an event's detail
// has no size limit of its own); when either bound is reached the cache
// starts again, and each tenant's next read pays for a page.
const (
	newestPagesSize  = 512
	newestPagesBytes = 32 << 20
)

// pageBytes is about what a page holds in memory.
func pageBytes(p Page) int {
	n := 0
	for _, r := range p.Rows {
		n += 256 + len(r.Detail) + len(r.Action) + len(r.Entity) + len(r.EntityID) + len(r.TraceID) +
			len(r.ActorName) + len(r.ActorRole) + len(r.EntityUserName)
	}
	return n
}

func newNewestPages() *newestPages {
	return &newestPages{now: time.Now, maxAge: 30 * time.Second}
}

// kept is tenantID's page read for limit, whatever its version, unless it
// is older than maxAge. Its rows are a copy: callers may reorder or trim
// them.
func (c *newestPages) kept(tenantID int64, limit int) (newestPage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[tenantID]
	if !ok || p.limit != limit || c.now().Sub(p.readAt) >= c.maxAge {
		return newestPage{}, false
	}
	p.page = Page{Rows: slices.Clone(p.page.Rows), Next: p.page.Next}
	return p, true
}

func (c *newestPages) put(tenantID int64, ver timelineVersion, limit int, readAt time.Time, page Page) {
	size := pageBytes(page)
	if size > newestPagesBytes/64 {
		return // a page this large is read each time rather than crowd out the others
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[tenantID]; ok {
		c.bytes -= old.bytes
	}
	if c.m == nil || len(c.m) >= newestPagesSize || c.bytes+size > newestPagesBytes {
		c.m, c.bytes = make(map[int64]newestPage, newestPagesSize), 0
	}
	c.m[tenantID] = newestPage{ver: ver, limit: limit, readAt: readAt, page: Page{Rows: slices.Clone(page.Rows), Next: page.Next}, bytes: size}
	c.bytes += size
}

// newest is Timeline's first unfiltered page. The version is read before
// the page, in a statement of its own, so a page kept is never older than
// its version: anything committed in between changes the version the next
// request reads. (ReadTenantAll's statements go out in no set order.)
//
// When the version has moved on from a kept page's, the page is brought up
// to date from what changed since (AuditEventTimelineChanged: a few rows
// while events keep coming, where the page itself is fifty with their
// leaves and names) rather than read again, unless more changed than
// newestChangedMax. A page so updated keeps the time of its last full
// read, so maxAge still bounds how long a change made outside Jejak waits.
func (s *Service) newest(ctx context.Context, tenantID int64, limit int) (Page, error) {
	readAt := s.newestPages.now()
	var ver timelineVersion
	err := database.ReadTenant(ctx, s.app, tenantID, func(db database.Querier) (err error) {
		if ver, err = newStore(db).timelineVersion(ctx, tenantID); err != nil {
			return wrapf(err, "read timeline version of tenant %d", tenantID)
		}
		return nil
	})
	if err != nil {
		return Page{}, err
	}
	kept, ok := s.newestPages.kept(tenantID, limit)
	if ok && kept.ver == ver {
		return kept.page, nil
	}
	update := ok && ver.size >= kept.ver.size && ver.unsealed+(ver.size-kept.ver.size) <= newestChangedMax
	var page Page
	err = database.ReadTenant(ctx, s.app, tenantID, func(db database.Querier) (err error) {
		if !update {
			page, err = Timeline(ctx, db, tenantID, Filter{}, 0, limit)
			return err
		}
		lim := keyset.Limit(limit)
		changed, err := newStore(db).timelineChanged(ctx, tenantID, kept.page.Next, kept.ver.size, lim+1)
		if err != nil {
			return wrapf(err, "read changes to the audit timeline of tenant %d", tenantID)
		}
		page = updatedPage(kept.page, changed, lim)
		return nil
	})
	if err != nil {
		return Page{}, err
	}
	if update {
		readAt = kept.readAt
		s.newestPages.updates.Add(1)
	}
	s.newestPages.put(tenantID, ver, limit, readAt, page)
	return page, nil
}

// newestChangedMax bounds the unsealed events plus the events sealed since
// a kept page was read that an update of the page reads through; past it
// (a sealer far behind, a burst of writes) the page is read afresh.
const newestChangedMax = 4 * keyset.MaxLimit

// updatedPage is kept, a newest page of limit rows, with changed laid
// over it: changed holds, newest first, every event that became visible
// or was sealed since kept was read, from kept's last row on when kept
// had older rows after it (at most limit+1 of them, the newest). A
// row in both is changed's (it has been sealed since).
func updatedPage(kept Page, changed []Recorded, limit int) Page {
	rows := make([]Recorded, 0, len(changed)+len(kept.Rows))
	in := make(map[int64]bool, len(changed))
	for _, r := range changed {
		in[r.ID] = true
	}
	rows = append(rows, changed...)
	for _, r := range kept.Rows {
		if !in[r.ID] {
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b Recorded) int { return cmp.Compare(b.ID, a.ID) })
	if len(rows) > limit {
		return keyset.Cut(rows, limit, func(e *Recorded) int64 { return e.ID })
	}
	// Not one row fell off: the older rows after kept's last are still
	// there, or there were none.
	return Page{Rows: rows, Next: kept.Next}
}
