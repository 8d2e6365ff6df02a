package tenant

import (
	"context"
	"strconv"
)

// Name is how staff pages and the command line name a tenant.
type Name struct {
	ID   int64
	Slug string
	Name string
}

// Names lists every tenant by slug. The tenants registry spans tenants, so
// it is read through the system pool.
func (s *Service) Names(ctx context.Context) (Names, error) {
	return newStore(s.system).names(ctx)
}

// Names is every tenant, ordered by slug.
type Names []Name

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
