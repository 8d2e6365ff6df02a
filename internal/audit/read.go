package audit

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Filter narrows a tenant's timeline or export; zero fields match all.
type Filter struct {
	Action    string
	Entity    string
	EntityID  string // only meaningful with Entity
	ActorKind ActorKind
	ActorID   *int64
	TraceID   string
	JobID     *int64
	From      *time.Time // inclusive
	To        *time.Time // exclusive
}

// Cursor marks where the next page starts. Timeline pages by Seq (per
// tenant), Search by ID (global).
type Cursor struct {
	Seq int64
	ID  int64
}

// String renders the cursor for a URL ("older" links).
func (c Cursor) String() string {
	if c.ID != 0 {
		return "i" + strconv.FormatInt(c.ID, 10)
	}
	return strconv.FormatInt(c.Seq, 10)
}

// ParseCursor reads a cursor written by Cursor.String; "" is no cursor.
func ParseCursor(s string) (*Cursor, error) {
	if s == "" {
		return nil, nil
	}
	field := &Cursor{}
	target := &field.Seq
	if s[0] == 'i' {
		s, target = s[1:], &field.ID
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return nil, fmt.Errorf("%w: bad cursor", ErrInvalid)
	}
	*target = n
	return field, nil
}

// Page is one page of events, newest first. Next is nil on the last page.
type Page struct {
	Events []Recorded
	Next   *Cursor
}

// MaxPageSize bounds every page.
const MaxPageSize = 500

func clampLimit(limit int) int {
	if limit <= 0 {
		return 50
	}
	if limit > MaxPageSize {
		return MaxPageSize
	}
	return limit
}

// Timeline returns a tenant's events newest first, filtered, one page at a
// time: pass the previous page's Next to get older events (keyset on seq,
// never OFFSET, so every page costs the same). Run it in
// database.InTenantTx for tenantID (or on the system pool for staff).
func Timeline(ctx context.Context, db DB, tenantID int64, f Filter, before *Cursor, limit int) (Page, error) {
	limit = clampLimit(limit)
	var beforeSeq *int64
	if before != nil {
		beforeSeq = &before.Seq
	}
	// One extra row tells whether an older page exists without a count.
	events, err := newFilteredStore(db).timeline(ctx, tenantID, f, beforeSeq, limit+1)
	if err != nil {
		return Page{}, wrapf(err, "read audit timeline of tenant %d", tenantID)
	}
	p := Page{Events: events}
	if len(events) > limit {
		p.Events = events[:limit]
		p.Next = &Cursor{Seq: p.Events[limit-1].Seq}
	}
	return p, nil
}

// MaxEntityHistory bounds EntityHistory; an entity with a longer story is
// read through Timeline with an Entity filter.
const MaxEntityHistory = 1000

// EntityHistory returns one entity's events in one tenant, oldest first
// (seed 000's riwayat): (tenant, entity, entity id) is the identity; the
// same id in another tenant is another story.
func EntityHistory(ctx context.Context, db DB, tenantID int64, entity, entityID string) ([]Recorded, error) {
	events, err := newStore(db).entityHistory(ctx, tenantID, entity, entityID, MaxEntityHistory)
	if err != nil {
		return nil, wrapf(err, "read history of %s %s in tenant %d", entity, entityID, tenantID)
	}
	return events, nil
}

// SearchQuery is a forensic search by trace id and/or job id (at least one),
// optionally within one tenant.
type SearchQuery struct {
	TraceID  string
	JobID    *int64
	TenantID *int64 // nil: every tenant the connection can see
}

// Search finds events by trace id or job id, newest first, paged by event
// id. On the system pool it spans tenants (staff forensics); on a
// tenant-scoped transaction row-level security limits it to that tenant.
func Search(ctx context.Context, db DB, q SearchQuery, before *Cursor, limit int) (Page, error) {
	if q.TraceID == "" && q.JobID == nil {
		return Page{}, fmt.Errorf("%w: search needs a trace id or a job id", ErrInvalid)
	}
	limit = clampLimit(limit)
	var beforeID *int64
	if before != nil && before.ID > 0 {
		beforeID = &before.ID
	}
	events, err := newFilteredStore(db).search(ctx, q, beforeID, limit+1)
	if err != nil {
		return Page{}, wrapf(err, "search audit events")
	}
	p := Page{Events: events}
	if len(events) > limit {
		p.Events = events[:limit]
		p.Next = &Cursor{ID: p.Events[limit-1].ID}
	}
	return p, nil
}
