package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/jejakhq/jejak/internal/keyset"
)

// Filter narrows a tenant's timeline or export; zero fields match all.
type Filter struct {
	Action string
	// Actions matches any of several actions (a quick filter); nil for all.
	Actions   []string
	Entity    string
	EntityID  string // only meaningful with Entity
	ActorKind ActorKind
	ActorID   *int64
	TraceID   string
	JobID     *int64
	From      *time.Time // inclusive
	To        *time.Time // exclusive
	// Search matches events whose detail holds a string containing it (a
	// name, an e-mail, a reason), case-insensitively; see CheckSearch.
	Search string
}

// unfiltered reports whether f narrows nothing: the plain trail, which
// has a statement of its own.
func (f *Filter) unfiltered() bool {
	return f.Action == "" && f.Actions == nil && f.Entity == "" && f.EntityID == "" && f.ActorKind == "" &&
		f.ActorID == nil && f.TraceID == "" && f.JobID == nil && f.From == nil && f.To == nil && f.Search == ""
}

// Page is one page of events, newest first; Next is the event id to pass
// as the next page's cursor, 0 on the last page.
type Page = keyset.Page[Recorded]

// Timeline returns a tenant's events newest first, filtered, one page at a
// time: pass the previous page's Next to get older events (keyset on the
// event id, never OFFSET, so every page costs the same). Unsealed events
// are there at once, with Seq 0. Run it in database.InTenantTx for
// tenantID (or on the system pool for staff).
func Timeline(ctx context.Context, db DB, tenantID int64, f Filter, beforeID int64, limit int) (Page, error) {
	limit = keyset.Limit(limit)
	// One extra row tells whether an older page exists without a count.
	var events []Recorded
	var err error
	if f.unfiltered() {
		events, err = newStore(db).timelineAll(ctx, tenantID, positive(beforeID), limit+1)
	} else {
		events, err = newFilteredStore(db).timeline(ctx, tenantID, f, positive(beforeID), limit+1)
	}
	if err != nil {
		return Page{}, wrapf(err, "read audit timeline of tenant %d", tenantID)
	}
	return keyset.Cut(events, limit, func(e *Recorded) int64 { return e.ID }), nil
}

// MaxEntityHistory bounds EntityHistory; an entity with a longer story is
// read through Timeline with an Entity filter.
const MaxEntityHistory = 1000

// History is one entity's story: its name (the name its events last gave
// it, or the user's name for a user; "" when it has none) and its events,
// oldest first.
type History struct {
	Name   string
	Events []Recorded
}

// EntityHistory returns one entity's events in one tenant, oldest first
// (the entity's history page): (tenant, entity, entity id) is the identity; the
// same id in another tenant is another story. An entity whose events name
// it ("name" in the detail) also gathers the events of its namesakes of the
// same entity type: a project deleted and created again under its old name
// has a new id, and its owner reads one story.
func EntityHistory(ctx context.Context, db DB, tenantID int64, entity, entityID string) (History, error) {
	st := newStore(db)
	name, err := st.entityName(ctx, tenantID, entity, entityID)
	if err != nil {
		return History{}, wrapf(err, "read name of %s %s in tenant %d", entity, entityID, tenantID)
	}
	events, err := st.entityHistory(ctx, tenantID, entity, entityID, name, MaxEntityHistory)
	if err != nil {
		return History{}, wrapf(err, "read history of %s %s in tenant %d", entity, entityID, tenantID)
	}
	if name == "" && len(events) > 0 {
		name = events[0].EntityUserName
	}
	return History{Name: name, Events: events}, nil
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
func Search(ctx context.Context, db DB, q SearchQuery, beforeID int64, limit int) (Page, error) {
	if q.TraceID == "" && q.JobID == nil {
		return Page{}, fmt.Errorf("%w: search needs a trace id or a job id", ErrInvalid)
	}
	limit = keyset.Limit(limit)
	events, err := newFilteredStore(db).search(ctx, q, positive(beforeID), limit+1)
	if err != nil {
		return Page{}, wrapf(err, "search audit events")
	}
	return keyset.Cut(events, limit, func(e *Recorded) int64 { return e.ID }), nil
}

// positive is a keyset cursor as a query argument: nil for the first page.
func positive(n int64) *int64 {
	if n <= 0 {
		return nil
	}
	return &n
}
