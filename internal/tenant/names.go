package tenant

import (
	"context"
	"strconv"

	"github.com/jejakhq/jejak/internal/database"
)

// Name is how staff pages and the command line name a tenant.
type Name struct {
	ID   int64
	Slug string
	Name string
	// System marks the reserved tenant that owns Jejak's own notifications
	// to staff (alert webhooks): it has no members and no pages, and lists
	// of customer tenants leave it out (Listed).
	System bool
}

// SystemSlug is the reserved tenant's slug (db/schema/00060).
const SystemSlug = "jejak-system"

// Names lists every tenant by slug. The tenants registry spans tenants, so
// it is read through the system pool.
func (s *Service) Names(ctx context.Context) (Names, error) {
	return ReadNames(ctx, s.system)
}

// ReadNames is Names on db (the system pool, or a read of
// database.ReadAll on it): one statement.
func ReadNames(ctx context.Context, db database.Querier) (Names, error) {
	return newStore(db).names(ctx)
}

// Names is every tenant, ordered by slug.
type Names []Name

// Listed is every customer tenant: Names without the system tenant, for
// pickers, lists and per-tenant figures. Labels keep using Names, so the
// system tenant's own jobs (its webhook deliveries) are still named.
func (n Names) Listed() Names {
	out := make(Names, 0, len(n))
	for _, t := range n {
		if !t.System {
			out = append(out, t)
		}
	}
	return out
}

// BySlug returns the tenant with slug; ok is false when none has it.
func (n Names) BySlug(slug string) (Name, bool) {
	for _, t := range n {
		if t.Slug == slug {
			return t, true
		}
	}
	return Name{}, false
}

// ByID returns tenant id; ok is false when there is none.
func (n Names) ByID(id int64) (Name, bool) {
	for _, t := range n {
		if t.ID == id {
			return t, true
		}
	}
	return Name{}, false
}

// Slug returns the slug of tenant id, or "#id" when unknown.
func (n Names) Slug(id int64) string {
	if t, ok := n.ByID(id); ok {
		return t.Slug
	}
	return "#" + strconv.FormatInt(id, 10)
}
