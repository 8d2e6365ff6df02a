package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/approval"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/console"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/staff"
	staffsupport "github.com/jejakhq/jejak/internal/support"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/views/admin"
	"github.com/jejakhq/jejak/views/components"
	"github.com/jejakhq/jejak/views/support"
)

// Staff tenant pages and two-person approvals.

// staffStampPtr is components.When for an optional time ("" when nil:
// the views leave the cell empty).
func staffStampPtr(ctx context.Context, t *time.Time) string {
	if t == nil {
		return ""
	}
	return components.When(ctx, *t)
}

// adminTenants is the tenant search.
func (s *Server) adminTenants(c echo.Context) error {
	ctx := c.Request().Context()
	q := c.QueryParam("q")
	rows, err := s.Support.Search(ctx, q)
	if err != nil {
		return err
	}
	vm := support.TenantsVM{Query: q}
	for _, r := range rows {
		vm.Rows = append(vm.Rows, support.TenantRow{Slug: r.Slug, Name: r.Name, Plan: r.Plan, Status: r.Status,
			Members: i18n.Number(ctx, r.Members)})
	}
	return render(c, http.StatusOK, support.TenantsPage(vm))
}

// adminTenant is one tenant as staff see it, with its audit trail under
// the owner timeline's filters. Reading it records staff.viewed_audit.
func (s *Server) adminTenant(c echo.Context) error {
	ctx := c.Request().Context()
	slug := pathParam(c, "slug")
	t, err := s.Tenants.BySlug(ctx, slug)
	if err != nil {
		return err
	}
	// A staff page: the trail's days and times are in the staff member's
	// zone, like every other staff page, not the tenant's.
	loc := viewer(c).Location()
	af, ferr := s.parseAuditFilter(c, loc)
	vm := support.TenantVM{Slug: t.Slug, Name: t.Name, Zone: zoneLabel(loc), Flash: s.popFlash(c),
		FilterAction: af.form.Action, FilterEntity: af.form.Entity, FilterActor: af.form.Actor,
		FilterFrom: af.form.From, FilterTo: af.form.To, FilterErrors: af.form.Errors}
	if ferr != nil {
		return render(c, http.StatusUnprocessableEntity, support.TenantPage(vm))
	}
	before, _, err := seqParam(c, "before")
	if err != nil {
		return err
	}
	v := viewer(c)
	page, err := s.Support.Read(ctx, v.UserID, reqctx.Trace(ctx), slug, af.f, before, auditPageSize)
	if err != nil {
		return err
	}
	approvals, err := s.Approvals.ForTenant(ctx, page.ID, 20)
	if err != nil {
		return err
	}
	ids := []int64{}
	for _, ch := range page.PlanChanges {
		if ch.ChangedBy != nil {
			ids = append(ids, *ch.ChangedBy)
		}
	}
	for _, a := range approvals {
		ids = append(ids, a.RequestedBy)
		if a.DecidedBy != nil {
			ids = append(ids, *a.DecidedBy)
		}
	}
	names, err := s.Users.Names(ctx, ids)
	if err != nil {
		return err
	}
	if page.Subscription != nil {
		vm.Plan, vm.Status = page.Subscription.PlanCode, string(page.Subscription.Status)
		vm.Period = i18n.T(ctx, "support.period_ends", components.When(ctx, page.Subscription.PeriodEnd))
	}
	vm.Members = staffMemberRows(c, t, page.Members)
	vm.PlanHistory, vm.StatusHistory = staffHistoryRows(ctx, page, names)
	for _, j := range page.Jobs {
		vm.Jobs = append(vm.Jobs, support.JobRow{ID: strconv.FormatInt(j.ID, 10), Kind: j.Kind, State: j.State,
			Attempts: i18n.Number(ctx, int64(j.Attempt)) + "/" + i18n.Number(ctx, int64(j.MaxAttempts)), Created: components.When(ctx, j.CreatedAt),
			LastError: truncRunes(j.LastError, 120), TraceID: j.TraceID, URL: "/admin/jobs/" + strconv.FormatInt(j.ID, 10)})
	}
	slugs := map[int64]string{page.ID: page.Slug}
	for _, a := range approvals {
		vm.Approvals = append(vm.Approvals, approvalRow(c, a, slugs, names, v.UserID))
	}
	vm.Audit = s.auditRows(ctx, t, page.Audit.Rows)
	// Entity links stay on the staff page: the entity's history is this
	// trail filtered by entity and id. The records come with the page:
	// the tenant's record route is its members'.
	for i := range vm.Audit {
		r := &vm.Audit[i]
		r.RecordURL = ""
		if r.EntityID != "" {
			r.EntityURL = "/admin/tenants/" + url.PathEscape(t.Slug) + "?" + url.Values{"entity": {r.Entity}, "entity_id": {r.EntityID}}.Encode()
		}
	}
	if page.Audit.Next != 0 {
		vm.OlderURL = linkWith("/admin/tenants/"+t.Slug, af.query, "before", strconv.FormatInt(page.Audit.Next, 10))
	}
	return render(c, http.StatusOK, support.TenantPage(vm))
}

// staffHistoryRows lists a tenant's plan and status changes for staff.
func staffHistoryRows(ctx context.Context, page *staffsupport.Tenant, names map[int64]string) (plan, status []support.HistoryRow) {
	for _, ch := range page.PlanChanges {
		from := "—"
		if ch.FromPlan != nil {
			from = *ch.FromPlan
		}
		by := i18n.T(ctx, "support.system")
		if ch.ChangedBy != nil {
			by = nameOr(ctx, names, *ch.ChangedBy)
		}
		plan = append(plan, support.HistoryRow{When: components.When(ctx, ch.ChangedAt), What: from + " → " + ch.ToPlan, By: by})
	}
	for _, ch := range page.StatusChanges {
		by := i18n.T(ctx, "support.system")
		if ch.JobID != nil {
			by = i18n.T(ctx, "support.system_job", strconv.FormatInt(*ch.JobID, 10))
		}
		status = append(status, support.HistoryRow{When: components.When(ctx, ch.ChangedAt),
			What: i18n.Enum(ctx, "status", string(ch.FromStatus)) + " → " + i18n.Enum(ctx, "status", string(ch.ToStatus)), By: by})
	}
	return plan, status
}

// staffMemberRows lists a tenant's members for staff, with the disable
// request form and, for admins, the lift form of a disabled membership.
func staffMemberRows(c echo.Context, t *tenant.Tenant, members []staffsupport.Member) []support.MemberRow {
	ctx := c.Request().Context()
	loc := viewer(c).Location()
	var rows []support.MemberRow
	for _, m := range members {
		row := support.MemberRow{UserID: strconv.FormatInt(m.UserID, 10), Name: m.Name, Email: m.Email, Role: m.Role,
			Since: i18n.Date(i18n.Lang(ctx), m.Since.In(loc)), Status: i18n.T(ctx, "support.member_active"),
			DisableURL: fmt.Sprintf("/admin/tenants/%s/members/%d/disable", url.PathEscape(t.Slug), m.UserID)}
		if m.DisabledAt != nil && can(c, staff.LiftDisable) {
			row.LiftURL = fmt.Sprintf("/admin/tenants/%s/members/%d/lift", url.PathEscape(t.Slug), m.UserID)
		}
		if m.DisabledAt != nil {
			row.Disabled, row.Status, row.DisabledReason = true, i18n.T(ctx, "support.member_disabled", components.WhenPtr(ctx, m.DisabledAt)), m.DisabledReason
		} else if !m.UserActive {
			row.Status = i18n.T(ctx, "support.account_deactivated")
		}
		rows = append(rows, row)
	}
	return rows
}

func nameOr(ctx context.Context, names map[int64]string, id int64) string {
	if n := names[id]; n != "" {
		return n
	}
	return i18n.T(ctx, "support.user_n", strconv.FormatInt(id, 10))
}

func truncRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func approvalRow(c echo.Context, a approval.Approval, slugs map[int64]string, names map[int64]string, me int64) support.ApprovalRow {
	ctx := c.Request().Context()
	slug := slugs[a.TenantID]
	r := support.ApprovalRow{
		ID: strconv.FormatInt(a.ID, 10), Tenant: slug, TenantURL: "/admin/tenants/" + slug, Action: a.Action,
		Reason: a.Reason, RequestedBy: nameOr(ctx, names, a.RequestedBy), RequestedAt: components.When(ctx, a.RequestedAt),
		ExpiresAt: components.When(ctx, a.ExpiresAt), State: a.State, DecisionReason: a.DecisionReason,
		Consumed: staffStampPtr(ctx, a.ConsumedAt), TraceID: a.TraceID, Pending: a.State == approval.StatePending,
		OwnRequest: a.RequestedBy == me, CanDecide: can(c, staff.Decide),
	}
	switch a.Action {
	case approval.ActionDisableAccess:
		r.Target = i18n.T(ctx, "support.user_n", strconv.FormatInt(a.TargetID, 10))
		if n := names[a.TargetID]; n != "" {
			r.Target = n
		}
	case approval.ActionReplay:
		r.Target = i18n.T(ctx, "support.job_n", strconv.FormatInt(a.TargetID, 10))
	}
	if a.DecidedBy != nil {
		r.DecidedBy, r.DecidedAt = nameOr(ctx, names, *a.DecidedBy), staffStampPtr(ctx, a.DecidedAt)
	}
	if a.JobID != nil {
		r.Job = strconv.FormatInt(*a.JobID, 10)
		r.JobURL = "/admin/jobs/" + r.Job
	}
	return r
}

// adminMemberDisable requests (does not perform) disabling a member's
// access: a pending approval that a different staff member must approve.
func (s *Server) adminMemberDisable(c echo.Context) error {
	ctx := c.Request().Context()
	slug := pathParam(c, "slug")
	t, err := s.Tenants.BySlug(ctx, slug)
	if err != nil {
		return err
	}
	userID, err := strconv.ParseInt(c.Param("user_id"), 10, 64)
	if err != nil || userID <= 0 {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	v := viewer(c)
	a, err := s.Approvals.RequestDisable(ctx, approval.Staff{UserID: v.UserID, TraceID: reqctx.Trace(ctx)}, t.ID, userID, c.FormValue("reason"))
	if err != nil {
		return err
	}
	s.setFlash(c, i18n.T(ctx, "support.flash_disable_requested", a.ID, userID))
	return c.Redirect(http.StatusSeeOther, "/admin/approvals")
}

// adminMemberLift gives a staff-disabled member their access back (admin
// staff, with a reason; recorded in the tenant's trail).
func (s *Server) adminMemberLift(c echo.Context) error {
	ctx := c.Request().Context()
	t, err := s.Tenants.BySlug(ctx, pathParam(c, "slug"))
	if err != nil {
		return err
	}
	userID, err := strconv.ParseInt(c.Param("user_id"), 10, 64)
	if err != nil || userID <= 0 {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	err = s.Approvals.LiftDisable(ctx, approval.Staff{UserID: viewer(c).UserID, TraceID: reqctx.Trace(ctx)}, t.ID, userID, c.FormValue("reason"))
	if err != nil {
		return err
	}
	s.setFlash(c, i18n.T(ctx, "support.flash_lifted", userID))
	return c.Redirect(http.StatusSeeOther, "/admin/tenants/"+url.PathEscape(t.Slug))
}

// adminApprovals lists pending and recently decided requests.
func (s *Server) adminApprovals(c echo.Context) error {
	ctx := c.Request().Context()
	pending, err := s.Approvals.Pending(ctx, 200)
	if err != nil {
		return err
	}
	recent, err := s.Approvals.Recent(ctx, 50)
	if err != nil {
		return err
	}
	slugs, err := s.tenantSlugs(c)
	if err != nil {
		return err
	}
	var ids []int64
	for _, a := range append(append([]approval.Approval{}, pending...), recent...) {
		ids = append(ids, a.RequestedBy, a.TargetID)
		if a.DecidedBy != nil {
			ids = append(ids, *a.DecidedBy)
		}
	}
	names, err := s.Users.Names(ctx, ids)
	if err != nil {
		return err
	}
	me := viewer(c).UserID
	vm := support.ApprovalsVM{Flash: s.popFlash(c), Error: s.sessions.PopString(ctx, sessionFlashError)}
	for _, a := range pending {
		vm.Pending = append(vm.Pending, approvalRow(c, a, slugs, names, me))
	}
	for _, a := range recent {
		vm.Recent = append(vm.Recent, approvalRow(c, a, slugs, names, me))
	}
	return render(c, http.StatusOK, support.ApprovalsPage(vm))
}

const sessionFlashError = "flash_error"

func (s *Server) adminApprove(c echo.Context) error { return s.adminDecide(c, true) }

func (s *Server) adminReject(c echo.Context) error { return s.adminDecide(c, false) }

// adminDecide approves or rejects a request. A refusal the staff member
// can act on (own request, already decided, missing reason) comes back
// on the approvals page with its HTTP status and changes nothing.
func (s *Server) adminDecide(c echo.Context, approve bool) error {
	ctx := c.Request().Context()
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return echo.NewHTTPError(http.StatusNotFound)
	}
	staff := approval.Staff{UserID: viewer(c).UserID, TraceID: reqctx.Trace(ctx)}
	var a *approval.Approval
	if approve {
		a, err = s.Approvals.Approve(ctx, staff, id, c.FormValue("reason"))
	} else {
		a, err = s.Approvals.Reject(ctx, staff, id, c.FormValue("reason"))
	}
	if err != nil {
		code := apperr.CodeOf(err)
		if code == apperr.CodeNotFound || code == apperr.CodeInternal {
			return err
		}
		status, msg := statusOf(err)
		vm := support.ApprovalsVM{Error: msg}
		return s.renderApprovalsWith(c, status, vm)
	}
	msg := i18n.T(ctx, "support.flash_rejected", a.ID)
	if approve {
		msg = i18n.T(ctx, "support.flash_approved", a.ID)
		if a.JobID != nil {
			msg = i18n.T(ctx, "support.flash_approved_job", a.ID, *a.JobID)
		}
	}
	s.setFlash(c, msg)
	return c.Redirect(http.StatusSeeOther, "/admin/approvals")
}

// renderApprovalsWith re-renders the approvals page with an error.
func (s *Server) renderApprovalsWith(c echo.Context, status int, vm support.ApprovalsVM) error {
	ctx := c.Request().Context()
	pending, err := s.Approvals.Pending(ctx, 200)
	if err != nil {
		return err
	}
	slugs, err := s.tenantSlugs(c)
	if err != nil {
		return err
	}
	var ids []int64
	for _, a := range pending {
		ids = append(ids, a.RequestedBy, a.TargetID)
	}
	names, err := s.Users.Names(ctx, ids)
	if err != nil {
		return err
	}
	for _, a := range pending {
		vm.Pending = append(vm.Pending, approvalRow(c, a, slugs, names, viewer(c).UserID))
	}
	return render(c, status, support.ApprovalsPage(vm))
}

// tenantSlugs names every tenant by id (a small table), for labels.
func (s *Server) tenantSlugs(c echo.Context) (map[int64]string, error) {
	names, err := s.Tenants.Names(c.Request().Context())
	if err != nil {
		return nil, err
	}
	out := make(map[int64]string, len(names))
	for _, n := range names {
		out[n.ID] = n.Slug
	}
	return out, nil
}

// requestReplay turns a retry of a dead sensitive job into a request for a
// second staff member's approval; nothing runs until it is approved.
func (s *Server) requestReplay(c echo.Context, need *console.NeedsApprovalError, reason string) error {
	ctx := c.Request().Context()
	a, err := s.Approvals.RequestReplay(ctx, approval.Staff{UserID: viewer(c).UserID, TraceID: need.TraceID},
		need.TenantID, need.JobID, need.Kind, reason)
	if err != nil {
		return err
	}
	msg := i18n.T(ctx, "support.flash_replay_needs_approval", need.JobID, need.Kind, a.ID)
	if isHTMX(c) {
		return render(c, http.StatusAccepted, admin.DeadRowDone(need.JobID, "none", msg))
	}
	s.setFlash(c, msg)
	return c.Redirect(http.StatusSeeOther, "/admin/approvals")
}

// recordStaffViews records the staff member's read of every tenant trail
// whose events a staff page shows (once per tenant and hour).
func (s *Server) recordStaffViews(c echo.Context, page string, events []audit.Recorded) error {
	if s.Support == nil || len(events) == 0 {
		return nil
	}
	ids := make([]int64, 0, 4)
	for _, e := range events {
		ids = append(ids, e.TenantID)
	}
	ctx := c.Request().Context()
	return s.Support.RecordViews(ctx, viewer(c).UserID, reqctx.Trace(ctx), page, ids)
}
