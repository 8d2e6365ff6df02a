// Package staff says what each staff role may do: the one table of staff
// roles and their permissions. The web tier asks it for every /admin route
// and for what a staff page shows; domains that act for staff (approvals)
// ask it again before they change anything. docs/security.md ("Roles")
// shows the same table.
package staff

import (
	"slices"

	"github.com/jejakhq/jejak/internal/apperr"
)

// ErrNotPermitted refuses a staff member whose role lacks the permission
// an action needs (every permission support lacks is an admin's).
var ErrNotPermitted = apperr.Forbidden("This action is for admin staff.")

// Staff roles (users.staff_role).
const (
	RoleSupport = "support"
	RoleAdmin   = "admin"
)

// Roles lists the staff roles, least powerful first.
var Roles = []string{RoleSupport, RoleAdmin}

// Permission is one thing a staff member may do.
type Permission string

// Permissions. Support staff read everything staff can and repair one
// thing at a time (retry one job or one outbox message, queue a
// reconcile, ask for a two-person action); what is final, wide or secret
// is for admins.
const (
	// Read opens every staff page (jobs, dead letters, tenants and their
	// trails, approvals, outbox, alerts, traces).
	Read Permission = "read"
	// RetryOne retries one dead job or one failed outbox message (a
	// sensitive job's retry becomes a request for approval).
	RetryOne Permission = "retry-one"
	// RequestApproval asks for a two-person action (disable a member's
	// access); a different admin decides it.
	RequestApproval Permission = "request-approval"
	// Reconcile queues payment.reconcile for a tenant.
	Reconcile Permission = "reconcile"
	// DiscardOne discards one dead job: final, nothing runs again.
	DiscardOne Permission = "discard-one"
	// Bulk retries or discards many dead jobs or outbox messages at once
	// (one request can load every tenant's queue).
	Bulk Permission = "bulk"
	// Decide approves or rejects two-person requests.
	Decide Permission = "decide"
	// Pause pauses and resumes kinds and queues.
	Pause Permission = "pause"
	// Schedules changes periodic schedules (no route changes them yet; a
	// route that does must ask for this).
	Schedules Permission = "schedules"
	// Secrets sees webhook secrets (the staff alert webhook's).
	Secrets Permission = "secrets"
	// LiftDisable lifts a staff disable of a membership.
	LiftDisable Permission = "lift-disable"
)

// table is who holds what. Admins hold everything support holds.
var table = map[string][]Permission{
	RoleSupport: {Read, RetryOne, RequestApproval, Reconcile},
	RoleAdmin: {Read, RetryOne, RequestApproval, Reconcile,
		DiscardOne, Bulk, Decide, Pause, Schedules, Secrets, LiftDisable},
}

// All lists every permission, in the order the documentation shows them.
var All = []Permission{Read, RetryOne, RequestApproval, Reconcile, DiscardOne, Bulk, Decide, Pause, Schedules, Secrets, LiftDisable}

// Can reports whether a staff role ("" for a non-staff user) holds p.
func Can(role string, p Permission) bool { return slices.Contains(table[role], p) }

// Holders lists the staff roles that hold p.
func Holders(p Permission) []string {
	var out []string
	for _, r := range Roles {
		if Can(r, p) {
			out = append(out, r)
		}
	}
	return out
}

// Grants lists the permissions role holds, as strings (for
// reqctx.Viewer.Grants, which views read).
func Grants(role string) []string {
	out := make([]string, len(table[role]))
	for i, p := range table[role] {
		out[i] = string(p)
	}
	return out
}
