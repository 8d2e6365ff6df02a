package audit

import (
	"slices"
	"strings"

	"github.com/jejakhq/jejak/internal/apperr"
)

// QuickFilter is a question an owner asks of the trail ("who deleted
// something?", "what happened to billing?") as a set of actions, so the
// web layer offers it without knowing action names.
type QuickFilter string

// The quick filters, in the order the timeline shows them.
const (
	QuickDeletions QuickFilter = "deletions"
	QuickBilling   QuickFilter = "billing"
	QuickAccess    QuickFilter = "access"
	// QuickStaff is every event a support or admin staff member caused:
	// by actor rather than by action, so a staff action added later is in
	// it without a change here.
	QuickStaff   QuickFilter = "staff"
	QuickSignins QuickFilter = "signins"
	QuickJobs    QuickFilter = "jobs"
)

// QuickFilters lists the quick filters in display order.
func QuickFilters() []QuickFilter {
	return []QuickFilter{QuickDeletions, QuickBilling, QuickAccess, QuickStaff, QuickSignins, QuickJobs}
}

// ValidQuickFilter reports whether q names a quick filter.
func ValidQuickFilter(q QuickFilter) bool { return slices.Contains(QuickFilters(), q) }

// actions is every action Jejak itself writes to a tenant's trail, with
// the quick filters it belongs to. Applications recording their own
// actions through Recorder are not limited to it; every action here has a
// sentence in each catalog (the web package's tests enumerate both this
// list and the action codes written in the source).
var actions = map[string][]QuickFilter{
	"project.create":               nil,
	"project.delete":               {QuickDeletions},
	"subscription.change":          {QuickBilling},
	"subscription.status":          {QuickBilling},
	"subscription.status_changed":  {QuickBilling},
	"invoice.created":              {QuickBilling},
	"payment.charged":              {QuickBilling},
	"payment.declined":             {QuickBilling},
	"payment.reconciled_paid":      {QuickBilling},
	"payment.duplicate_detected":   {QuickBilling},
	"payment.refunded":             {QuickBilling},
	"payment.reconcile_requested":  {QuickBilling},
	"settings.members_see_billing": {QuickBilling, QuickAccess},
	"membership.set":               {QuickAccess},
	"member.invite":                {QuickAccess},
	"member.join":                  {QuickAccess},
	"member.remove":                {QuickAccess, QuickDeletions},
	"member.access_disabled":       {QuickAccess},
	"member.access_restored":       {QuickAccess},
	"invitation.revoke":            {QuickAccess, QuickDeletions},
	"approval.requested":           {QuickAccess},
	"approval.approved":            {QuickAccess},
	"approval.rejected":            {QuickAccess},
	"audit_token.create":           {QuickAccess},
	"audit_token.revoke":           {QuickAccess, QuickDeletions},
	"audit_token.use":              {QuickAccess},
	"auth.signin":                  {QuickSignins},
	"auth.signin_failed":           {QuickSignins},
	"staff.viewed_audit":           nil,
	"webhook.endpoint.create":      nil,
	"webhook.endpoint.enable":      nil,
	"webhook.endpoint.disable":     nil,
	"webhook.endpoint.rotate":      {QuickAccess},
	"webhook.delivery.resend":      nil,
	"webhook.endpoint.delete":      {QuickDeletions},
	"webhook.endpoint.configure":   nil,
	"webhook.endpoint.recover":     nil,
	"webhook.endpoint.test":        nil,
	"outbox.retry":                 nil,
	"report.sent":                  {QuickJobs},
	"points.awarded":               {QuickJobs},
	"system.daily-export":          {QuickJobs},
}

func init() {
	for s := range jobStages {
		g := []QuickFilter{QuickJobs}
		if s == JobDiscarded {
			g = append(g, QuickDeletions)
		}
		actions["job."+string(s)] = g
	}
}

// Actions returns every action Jejak writes, sorted.
func Actions() []string {
	out := make([]string, 0, len(actions))
	for a := range actions {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// KnownAction reports whether Jejak itself writes action a.
func KnownAction(a string) bool { _, ok := actions[a]; return ok }

// QuickActions returns the actions of quick filter q, sorted; nil for
// QuickStaff (which is by actor) and for an unknown q.
func QuickActions(q QuickFilter) []string {
	if q == QuickStaff {
		return nil
	}
	var out []string
	for a, gs := range actions {
		if slices.Contains(gs, q) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// Quick narrows f to quick filter q (which must be valid): its actions, or
// for QuickStaff the staff actor kind.
func (f *Filter) Quick(q QuickFilter) {
	if q == QuickStaff {
		f.ActorKind = ActorStaff
		return
	}
	f.Actions = QuickActions(q)
}

// MinSearchLen and MaxSearchLen bound a name search: under three
// characters a trigram index cannot help, so a search would read the
// whole trail.
const (
	MinSearchLen = 3
	MaxSearchLen = 100
)

// ErrSearchLength refuses a search term outside MinSearchLen..MaxSearchLen.
var ErrSearchLength = apperr.Invalid("q", "Search for 3 to 100 characters of a name.")

// CheckSearch returns the search term as the timeline matches it (trimmed,
// lower-case), or ErrInvalid when it is too short or too long.
func CheckSearch(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if n := len([]rune(s)); n < MinSearchLen || n > MaxSearchLen {
		return "", ErrSearchLength
	}
	return s, nil
}
