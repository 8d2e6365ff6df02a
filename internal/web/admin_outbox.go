package web

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/outboxconsole"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/staff"
	"github.com/jejakhq/jejak/views/admin"
	"github.com/jejakhq/jejak/views/components"
)

// outboxLiveVM is the outbox page's refreshing part: counts, lag and the
// last hour's deliveries.
func outboxLiveVM(ctx context.Context, st *outboxconsole.Status) admin.OutboxLiveVM {
	capped := func(n int64) string {
		if n >= outboxconsole.CountCap {
			return i18n.Number(ctx, n) + "+"
		}
		return i18n.Number(ctx, n)
	}
	vm := admin.OutboxLiveVM{Pending: capped(st.Pending), Processing: capped(st.Processing), Failed: capped(st.Failed),
		Lag: "—", Late: st.Late(), DeliveredHour: i18n.Number(ctx, st.DeliveredLastHour()), AsOf: components.When(ctx, st.Now)}
	if st.Pending > 0 {
		vm.Lag = components.Ago(st.OldestPendingAge)
	}
	for _, m := range st.Minutes {
		vm.Chart = append(vm.Chart, components.ChartMinute{Minute: m.At, Succeeded: m.Delivered, Failed: m.Failed})
	}
	return vm
}

func (s *Server) outboxVM(c echo.Context, tenantSlug string) (admin.OutboxVM, error) {
	ctx := c.Request().Context()
	page, err := s.Outbox.Page(ctx, tenantSlug, 100, 50)
	if err != nil {
		return admin.OutboxVM{}, err
	}
	vm := admin.OutboxVM{Live: outboxLiveVM(ctx, page.Status), Tenant: tenantSlug, Flash: s.popFlash(c)}
	for _, f := range page.Failed {
		vm.Failed = append(vm.Failed, admin.OutboxFailedRow{ID: strconv.FormatInt(f.ID, 10), Tenant: f.TenantSlug, Type: f.Type,
			Aggregate: f.AggregateType + ":" + f.AggregateID, Attempts: i18n.Number(ctx, int64(f.Attempts)), LastError: f.LastError,
			Created: components.When(ctx, f.CreatedAt)})
	}
	for _, e := range page.Endpoints {
		vm.Endpoints = append(vm.Endpoints, failingEndpointRow(ctx, e))
	}
	return vm, nil
}

// failingEndpointRow says what state a failing endpoint is in.
func failingEndpointRow(ctx context.Context, e outboxconsole.FailingEndpoint) admin.OutboxEndpointRow {
	r := admin.OutboxEndpointRow{Tenant: e.TenantSlug, URL: e.URL, Failures: i18n.Number(ctx, int64(e.ConsecutiveFailures)),
		State: i18n.T(ctx, "webhooks.breaker_failing")}
	if e.FailingSince != nil {
		r.FailingSince = i18n.T(ctx, "admin.failing_since", components.When(ctx, *e.FailingSince))
	}
	switch {
	case !e.Enabled:
		r.State = i18n.T(ctx, "webhooks.disabled") + ": " + i18n.T(ctx, e.DisabledReason)
	case e.BreakerOpen:
		r.State = i18n.T(ctx, "webhooks.breaker_open") + " · " + i18n.T(ctx, "webhooks.breaker_until", components.When(ctx, *e.BreakerOpenUntil))
	}
	return r
}

// adminOutbox is /admin/outbox; ?partial=live answers the cards and chart
// that htmx polls.
func (s *Server) adminOutbox(c echo.Context) error {
	if c.QueryParam("partial") == "live" {
		st, err := s.Outbox.Status(c.Request().Context())
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, admin.OutboxLive(outboxLiveVM(c.Request().Context(), st)))
	}
	vm, err := s.outboxVM(c, strings.TrimSpace(c.QueryParam("tenant")))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, admin.OutboxPage(vm))
}

// adminOutboxRetry retries one failed message (field id) or all of a
// tenant's (field tenant) or all, with a required reason recorded in each
// affected tenant's trail.
func (s *Server) adminOutboxRetry(c echo.Context) error {
	ctx := c.Request().Context()
	slug := strings.TrimSpace(c.FormValue("tenant"))
	var id int64
	if v := c.FormValue("id"); v != "" {
		var err error
		if id, err = strconv.ParseInt(v, 10, 64); err != nil || id <= 0 {
			return apperr.NotFound("no such outbox message")
		}
	}
	if id == 0 && !can(c, staff.Bulk) {
		// A tenant's or every failed message at once is a bulk action.
		return staff.ErrNotPermitted
	}
	reason := c.FormValue("reason")
	n, err := s.Outbox.Retry(ctx, outboxconsole.Operator{StaffUserID: viewer(c).UserID, TraceID: reqctx.Trace(ctx), Via: "dashboard"}, reason, slug, id)
	if apperr.CodeOf(err) == apperr.CodeInvalid {
		vm, verr := s.outboxVM(c, slug)
		if verr != nil {
			return verr
		}
		vm.ReasonError = "A reason is required (at most 500 characters); it is recorded in the tenant's audit trail."
		vm.Reason = reason
		return render(c, http.StatusUnprocessableEntity, admin.OutboxPage(vm))
	}
	if err != nil {
		return err
	}
	s.setFlash(c, i18n.Plural(ctx, "admin.flash_outbox_retried", int64(n), n))
	back := "/admin/outbox"
	if slug != "" {
		back += "?tenant=" + url.QueryEscape(slug)
	}
	return c.Redirect(http.StatusSeeOther, back)
}
