// Package reqctx carries the few cross-cutting request values (the signed-in
// viewer, the CSRF token, the request's trace id) through context.Context,
// with typed getters, so views can read them without every view model
// repeating them.
package reqctx

import (
	"context"
	"slices"
	"time"
)

type key int

const (
	viewerKey key = iota
	csrfKey
	traceKey
	memberKey
)

// Member is the viewer's standing in the tenant whose page this is: what
// the tenant's navigation offers them.
type Member struct {
	CanWrite    bool // owners and admins: webhooks, tokens
	SeesBilling bool // owners and admins, members when allowed
}

// WithMember returns ctx carrying the viewer's standing in the tenant.
func WithMember(ctx context.Context, m Member) context.Context {
	return context.WithValue(ctx, memberKey, m)
}

// MemberFrom returns the viewer's standing in the page's tenant (the zero
// Member, which offers nothing beyond reading, outside a tenant's pages).
func MemberFrom(ctx context.Context) Member {
	m, _ := ctx.Value(memberKey).(Member)
	return m
}

// Viewer is the signed-in user as pages need them.
type Viewer struct {
	UserID    int64
	Name      string
	Email     string
	StaffRole string // "", "support", "admin"
	// Grants are the staff permissions the role holds (staff.Can), so a
	// page offers only the actions its reader may take.
	Grants []string
	// Zone is the time zone staff pages are shown in (nil = UTC), and
	// ZoneChoices the zones a staff member is offered.
	Zone        *time.Location
	ZoneChoices []string
}

// Location is the zone the viewer reads staff pages in: their choice, else
// UTC (also for a nil viewer).
func (v *Viewer) Location() *time.Location {
	if v == nil || v.Zone == nil {
		return time.UTC
	}
	return v.Zone
}

// May reports whether the viewer holds the staff permission p (a
// staff.Permission's value).
func (v *Viewer) May(p string) bool {
	return v != nil && slices.Contains(v.Grants, p)
}

// IsStaff reports whether the viewer is support or admin staff.
func (v *Viewer) IsStaff() bool { return v != nil && v.StaffRole != "" }

// WithViewer returns ctx carrying v.
func WithViewer(ctx context.Context, v *Viewer) context.Context {
	return context.WithValue(ctx, viewerKey, v)
}

// ViewerFrom returns the signed-in viewer, or nil.
func ViewerFrom(ctx context.Context) *Viewer {
	v, _ := ctx.Value(viewerKey).(*Viewer)
	return v
}

// WithCSRF returns ctx carrying the session's CSRF token.
func WithCSRF(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, csrfKey, token)
}

// CSRF returns the session's CSRF token ("" outside a request).
func CSRF(ctx context.Context) string {
	s, _ := ctx.Value(csrfKey).(string)
	return s
}

// WithTrace returns ctx carrying a trace id.
func WithTrace(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, traceKey, id)
}

// Trace returns the request's trace id ("" when none).
func Trace(ctx context.Context) string {
	s, _ := ctx.Value(traceKey).(string)
	return s
}
