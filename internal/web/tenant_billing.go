package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/views/billing"
)

// rupiah prints an amount in IDR with dot thousands separators.
func rupiah(n int64) string {
	s := strconv.FormatInt(n, 10)
	out := []byte{}
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, '.')
		}
		out = append(out, c)
	}
	return "Rp " + string(out)
}

// tenantBilling is the owner's billing page: invoices, the provider's
// charges and the refunds of duplicates.
func (s *Server) tenantBilling(c echo.Context) error {
	t, m := currentTenant(c), membership(c)
	if !m.CanSeeBilling() {
		return tenant.ErrBillingHidden
	}
	vm := billing.VM{Slug: t.Slug, TenantName: t.Name, Owner: m.Role == tenant.RoleOwner, MembersSee: m.MembersSeeBilling,
		Flash: s.popFlash(c)}
	if s.Payments == nil {
		return render(c, http.StatusOK, billing.Page(vm))
	}
	ctx := c.Request().Context()
	b, err := s.Payments.Billing(ctx, t.ID)
	if err != nil {
		return err
	}
	loc := t.Location()
	refunded := map[string]bool{}
	for _, r := range b.Refunds {
		refunded[r.ChargeRef] = true
		vm.Refunds = append(vm.Refunds, billing.RefundRow{Invoice: strconv.FormatInt(r.InvoiceID, 10), Charge: r.ChargeRef,
			Refund: r.RefundRef, Amount: rupiah(r.Amount), Reason: r.Reason, Created: shownTime(ctx, r.CreatedAt.In(loc))})
	}
	for _, i := range b.Invoices {
		row := billing.InvoiceRow{ID: strconv.FormatInt(i.ID, 10), Plan: i.Plan, Amount: rupiah(i.Amount), Status: i.Status,
			Charge: i.ChargeRef, Created: shownTime(ctx, i.CreatedAt.In(loc))}
		if i.PaidAt != nil {
			row.Paid = shownTime(ctx, i.PaidAt.In(loc))
		}
		vm.Invoices = append(vm.Invoices, row)
	}
	for _, ch := range b.Charges {
		vm.Charges = append(vm.Charges, billing.ChargeRow{ID: ch.ID, Invoice: ch.Invoice, Amount: rupiah(ch.Amount),
			Refunded: rupiah(ch.Refunded), Created: shownTime(ctx, ch.CreatedAt.In(loc)), Duplicate: refunded[ch.ID]})
	}
	vm.ChargesErr = b.ChargesErr
	return render(c, http.StatusOK, billing.Page(vm))
}

// billingVisibility lets members see the billing page or hides it from
// them (owners only; field members_see_billing = on or off).
func (s *Server) billingVisibility(c echo.Context) error {
	ctx := c.Request().Context()
	var on bool
	switch c.FormValue("members_see_billing") {
	case "on":
		on = true
	case "off":
	default:
		return apperr.Invalid("members_see_billing", "Choose on or off.")
	}
	t := currentTenant(c)
	if err := s.Tenants.SetMembersSeeBilling(ctx, t.ID, actorOf(c), on); err != nil {
		return err
	}
	key := "billing.flash_members_hidden"
	if on {
		key = "billing.flash_members_see"
	}
	s.setFlash(c, i18n.T(ctx, key))
	return c.Redirect(http.StatusSeeOther, "/t/"+t.Slug+"/billing")
}

// adminTenantReconcile queues payment.reconcile for one tenant now.
func (s *Server) adminTenantReconcile(c echo.Context) error {
	ctx := c.Request().Context()
	t, err := s.Tenants.BySlug(ctx, pathParam(c, "slug"))
	if err != nil {
		return err
	}
	if s.Payments == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "Payments are not configured.")
	}
	id, err := s.Payments.EnqueueReconcile(ctx, t.ID, viewer(c).UserID, reqctx.Trace(ctx))
	if err != nil {
		return err
	}
	s.setFlash(c, i18n.T(ctx, "support.flash_reconcile", id))
	return c.Redirect(http.StatusSeeOther, "/admin/tenants/"+t.Slug)
}
