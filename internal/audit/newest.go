package audit

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jejakhq/jejak/internal/database"
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

func (c *newestPages) get(tenantID int64, ver timelineVersion, limit int) (Page, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[tenantID]
	if !ok || p.ver != ver || p.limit != limit || c.now().Sub(p.readAt) >= c.maxAge {
		return Page{}, false
	}
	// A copy: callers may reorder or trim their rows.
	return Page{Rows: slices.Clone(p.page.Rows), Next: p.page.Next}, true
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
	if p, ok := s.newestPages.get(tenantID, ver, limit); ok {
		return p, nil
	}
	var page Page
	err = database.ReadTenant(ctx, s.app, tenantID, func(db database.Querier) (err error) {
		page, err = Timeline(ctx, db, tenantID, Filter{}, 0, limit)
		return err
	})
	if err != nil {
		return Page{}, err
	}
	s.newestPages.put(tenantID, ver, limit, readAt, page)
	return page, nil
}
