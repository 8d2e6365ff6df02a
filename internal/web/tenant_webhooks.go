package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/clip"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/keyset"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/webhook"
	"github.com/jejakhq/jejak/views/components"
	viewtenant "github.com/jejakhq/jejak/views/tenant"
)

// Tenant webhooks: owners and admins manage endpoints and read their
// deliveries; members are refused (403) and other tenants' ids are 404.

func webhookActor(c echo.Context) webhook.Actor {
	return webhook.Actor{UserID: viewer(c).UserID, Role: membership(c).Role, TraceID: reqctx.Trace(c.Request().Context())}
}

func webhookID(c echo.Context, name string) (int64, error) {
	id, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, webhook.ErrNotFound
	}
	return id, nil
}

func (s *Server) webhooksVM(c echo.Context) (viewtenant.WebhooksVM, error) {
	t := currentTenant(c)
	before, err := keyset.Cursor("before", c.QueryParam("before"))
	if err != nil {
		return viewtenant.WebhooksVM{}, err
	}
	page, err := s.Webhooks.Endpoints(c.Request().Context(), t.ID, webhookActor(c), before)
	if err != nil {
		return viewtenant.WebhooksVM{}, err
	}
	vm := viewtenant.WebhooksVM{Slug: t.Slug, TenantName: t.Name, Flash: s.popFlash(c)}
	for _, e := range webhook.Catalog {
		vm.Catalog = append(vm.Catalog, viewtenant.CatalogRow{Type: e.Type, Schema: e.Schema, Example: e.Example})
	}
	for _, ep := range page.Rows {
		vm.Rows = append(vm.Rows, webhookRow(c.Request().Context(), t.Slug, ep, t.Location()))
	}
	if page.Next != 0 {
		vm.OlderURL = "/t/" + t.Slug + "/webhooks?before=" + keyset.Format(page.Next)
	}
	if before != 0 {
		vm.NewestURL = "/t/" + t.Slug + "/webhooks"
	}
	return vm, nil
}

func webhookRow(ctx context.Context, slug string, ep webhook.Endpoint, loc *time.Location) viewtenant.WebhookRow {
	lang := i18n.Lang(ctx)
	base := fmt.Sprintf("/t/%s/webhooks/%d", slug, ep.ID)
	r := viewtenant.WebhookRow{ID: strconv.FormatInt(ep.ID, 10), URL: ep.URL, Events: strings.Join(ep.Events, ", "),
		Enabled: ep.Enabled, DisabledReason: ep.DisabledReason,
		Created: components.Stamp(ep.CreatedAt, loc, lang), DetailURL: base, RotateURL: base + "/rotate",
		DeleteURL: base + "/delete", SettingsURL: base + "/settings", RecoverURL: base + "/recover",
		Breaker: "webhooks.breaker_" + ep.Health.Breaker, BreakerState: ep.Health.Breaker, BreakerBad: ep.Health.Breaker != webhook.BreakerClosed && ep.Health.Breaker != "",
		SuccessRate: "—", Ordered: ep.Ordered}
	if pct, ok := ep.Health.SuccessRate(); ok {
		r.SuccessRate = strconv.Itoa(pct) + "%"
		r.Attempts24h = strconv.FormatInt(ep.Health.Succeeded+ep.Health.Failed, 10)
	}
	if ep.Health.Breaker == webhook.BreakerOpen && ep.BreakerOpenUntil != nil {
		r.BreakerUntil = components.Stamp(*ep.BreakerOpenUntil, loc, lang)
	}
	if ep.Health.Held > 0 {
		n := i18n.Number(ctx, ep.Health.Held)
		if ep.Health.Held >= webhook.HeldCountCap {
			n += "+"
		}
		r.Held = i18n.Plural(ctx, "webhooks.held_count", ep.Health.Held, n)
	}
	if ep.RateLimit > 0 {
		r.RateLimit = strconv.Itoa(ep.RateLimit)
	}
	if ep.PreviousUntil != nil {
		r.PreviousUntil = components.Stamp(*ep.PreviousUntil, loc, lang)
	}
	if ep.Enabled {
		r.ToggleURL, r.ToggleLabel = base+"/disable", "Disable"
	} else {
		r.ToggleURL, r.ToggleLabel = base+"/enable", "Enable"
	}
	return r
}

func (s *Server) tenantWebhooks(c echo.Context) error {
	vm, err := s.webhooksVM(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, viewtenant.WebhooksPage(vm))
}

// tenantWebhookCreate registers an endpoint and answers the page with its
// secret, shown this once (no redirect: the secret must not be stored for
// a later GET).
func (s *Server) tenantWebhookCreate(c echo.Context) error {
	t := currentTenant(c)
	rawURL, rawEvents := c.FormValue("url"), c.FormValue("events")
	created, err := s.Webhooks.Create(c.Request().Context(), t.ID, webhookActor(c), rawURL, rawEvents)
	if apperr.CodeOf(err) == apperr.CodeInvalid {
		vm, verr := s.webhooksVM(c)
		if verr != nil {
			return verr
		}
		ctx := c.Request().Context()
		vm.FormURL, vm.FormEvents = rawURL, rawEvents
		vm.URLError, vm.EventsError = fieldMessage(ctx, err, "url"), fieldMessage(ctx, err, "events")
		return render(c, http.StatusUnprocessableEntity, viewtenant.WebhooksPage(vm))
	}
	if err != nil {
		return err
	}
	vm, err := s.webhooksVM(c)
	if err != nil {
		return err
	}
	vm.NewSecret, vm.NewSecretURL = created.Secret, created.Endpoint.URL
	c.Response().Header().Set("Cache-Control", "no-store")
	return render(c, http.StatusOK, viewtenant.WebhooksPage(vm))
}

func (s *Server) tenantWebhookSetEnabled(enabled bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := webhookID(c, "id")
		if err != nil {
			return err
		}
		t := currentTenant(c)
		if err := s.Webhooks.SetEnabled(c.Request().Context(), t.ID, webhookActor(c), id, enabled); err != nil {
			return err
		}
		if enabled {
			s.setFlash(c, i18n.T(c.Request().Context(), "webhooks.flash_enabled"))
		} else {
			s.setFlash(c, i18n.T(c.Request().Context(), "webhooks.flash_disabled"))
		}
		return c.Redirect(http.StatusSeeOther, "/t/"+t.Slug+"/webhooks")
	}
}

func (s *Server) tenantWebhookRotate(c echo.Context) error {
	id, err := webhookID(c, "id")
	if err != nil {
		return err
	}
	t := currentTenant(c)
	secret, err := s.Webhooks.Rotate(c.Request().Context(), t.ID, webhookActor(c), id)
	if err != nil {
		return err
	}
	vm, err := s.webhooksVM(c)
	if err != nil {
		return err
	}
	for _, r := range vm.Rows {
		if r.ID == strconv.FormatInt(id, 10) {
			vm.NewSecretURL = r.URL
		}
	}
	vm.NewSecret = secret
	vm.Flash = i18n.T(c.Request().Context(), "webhooks.flash_rotated", i18n.Duration(c.Request().Context(), webhook.RotationOverlap))
	c.Response().Header().Set("Cache-Control", "no-store")
	return render(c, http.StatusOK, viewtenant.WebhooksPage(vm))
}

func (s *Server) tenantWebhookDeliveries(c echo.Context) error {
	id, err := webhookID(c, "id")
	if err != nil {
		return err
	}
	t := currentTenant(c)
	ctx := c.Request().Context()
	ep, ds, err := s.Webhooks.EndpointDeliveries(ctx, t.ID, webhookActor(c), id, 50)
	if err != nil {
		return err
	}
	loc := t.Location()
	vm := viewtenant.WebhookDeliveriesVM{Slug: t.Slug, TenantName: t.Name, Endpoint: webhookRow(ctx, t.Slug, ep, loc),
		Flash: s.popFlash(c), MaxRate: strconv.Itoa(webhook.MaxRateLimit)}
	vm.TestURL = fmt.Sprintf("/t/%s/webhooks/%d/test", t.Slug, ep.ID)
	for _, e := range webhook.Catalog {
		vm.TestTypes = append(vm.TestTypes, e.Type)
	}
	for _, w := range webhook.RecoverWindows {
		vm.Recover = append(vm.Recover, viewtenant.RecoverChoice{Hours: strconv.Itoa(int(w.Hours())), Label: i18n.Duration(ctx, w)})
	}
	for _, d := range ds {
		vm.Rows = append(vm.Rows, deliveryRow(ctx, t.Slug, ep.ID, d, loc))
	}
	return render(c, http.StatusOK, viewtenant.WebhookDeliveriesPage(vm))
}

// deliveryRow shows a delivery the way an owner reads it: a pending one
// that already failed is "retrying" (red) with when it is tried next.
func deliveryRow(ctx context.Context, slug string, endpointID int64, d webhook.Delivery, loc *time.Location) viewtenant.WebhookDeliveryRow {
	row := viewtenant.WebhookDeliveryRow{ID: strconv.FormatInt(d.ID, 10), EventID: d.EventID, EventType: d.EventType,
		State: d.State, StateLabel: i18n.Enum(ctx, "delivery", d.State), StateClass: "pending",
		Attempts: strconv.Itoa(d.Attempts), Created: components.Stamp(d.CreatedAt, loc, i18n.Lang(ctx)),
		ResendURL: fmt.Sprintf("/t/%s/webhooks/%d/deliveries/%d/resend", slug, endpointID, d.ID)}
	// Each attempt shows its own answer; the last error is shown only when
	// no attempt says it (e.g. the endpoint was disabled or deleted).
	if len(d.Log) == 0 || (d.Log[0].Error != d.LastError && statusText(ctx, d.Log[0].StatusCode) != d.LastError) {
		row.LastError = d.LastError
	}
	switch {
	case d.State == webhook.StateSucceeded:
		row.StateClass = "succeeded"
	case d.State == webhook.StateFailed:
		row.StateClass = "dead"
	case d.Attempts > 0:
		row.State, row.StateLabel, row.StateClass = "retrying", i18n.T(ctx, "delivery.retrying"), "dead"
		row.NextIn = i18n.T(ctx, "webhooks.next_in", i18n.Duration(ctx, d.NextIn.Round(time.Second)))
	}
	if d.Held {
		row.NextIn = i18n.T(ctx, "webhooks.held")
	}
	for _, a := range d.Log {
		row.Log = append(row.Log, viewtenant.WebhookAttemptRow{N: strconv.Itoa(a.N), At: components.Stamp(a.At, loc, i18n.Lang(ctx)),
			Status: statusText(ctx, a.StatusCode), OK: a.StatusCode >= 200 && a.StatusCode < 300,
			Latency: latencyText(a.Latency), Response: clip.Bytes(a.Response, 300), Error: a.Error})
	}
	return row
}

// latencyText is an attempt's duration in milliseconds below ten seconds.
func latencyText(d time.Duration) string {
	if d < time.Millisecond {
		return "<1 ms"
	}
	if d < 10*time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
}

// tenantWebhookDelete deletes an endpoint.
func (s *Server) tenantWebhookDelete(c echo.Context) error {
	id, err := webhookID(c, "id")
	if err != nil {
		return err
	}
	t := currentTenant(c)
	ep, err := s.Webhooks.Delete(c.Request().Context(), t.ID, webhookActor(c), id)
	if err != nil {
		return err
	}
	s.setFlash(c, i18n.T(c.Request().Context(), "webhooks.flash_deleted", ep.URL))
	return c.Redirect(http.StatusSeeOther, "/t/"+t.Slug+"/webhooks")
}

// tenantWebhookSettings sets an endpoint's rate limit and ordering.
func (s *Server) tenantWebhookSettings(c echo.Context) error {
	id, err := webhookID(c, "id")
	if err != nil {
		return err
	}
	rate, err := webhook.ParseRateLimit(c.FormValue("rate_limit"))
	if err != nil {
		return err
	}
	t := currentTenant(c)
	settings := webhook.Settings{RateLimit: rate, Ordered: c.FormValue("ordered") != ""}
	if err := s.Webhooks.Configure(c.Request().Context(), t.ID, webhookActor(c), id, settings); err != nil {
		return err
	}
	s.setFlash(c, i18n.T(c.Request().Context(), "webhooks.flash_saved"))
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/t/%s/webhooks/%d", t.Slug, id))
}

// tenantWebhookTest sends the catalog's example of the chosen type.
func (s *Server) tenantWebhookTest(c echo.Context) error {
	id, err := webhookID(c, "id")
	if err != nil {
		return err
	}
	t := currentTenant(c)
	d, err := s.Webhooks.SendTest(c.Request().Context(), t.ID, webhookActor(c), id, c.FormValue("type"))
	if err != nil {
		return err
	}
	s.setFlash(c, i18n.T(c.Request().Context(), "webhooks.flash_test", d.EventType, d.EventID))
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/t/%s/webhooks/%d", t.Slug, id))
}

// tenantWebhookRecover sends again the endpoint's failed deliveries of the
// chosen span.
func (s *Server) tenantWebhookRecover(c echo.Context) error {
	id, err := webhookID(c, "id")
	if err != nil {
		return err
	}
	window, err := webhook.ParseRecoverWindow(c.FormValue("hours"))
	if err != nil {
		return err
	}
	t := currentTenant(c)
	n, err := s.Webhooks.RecoverLast(c.Request().Context(), t.ID, webhookActor(c), id, window)
	if err != nil {
		return err
	}
	s.setFlash(c, i18n.T(c.Request().Context(), "webhooks.flash_recovered", n))
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/t/%s/webhooks/%d", t.Slug, id))
}

func statusText(ctx context.Context, code int) string {
	if code == 0 {
		return i18n.T(ctx, "webhooks.no_answer")
	}
	return "HTTP " + strconv.Itoa(code)
}

func (s *Server) tenantWebhookResend(c echo.Context) error {
	id, err := webhookID(c, "id")
	if err != nil {
		return err
	}
	did, err := webhookID(c, "delivery")
	if err != nil {
		return err
	}
	t := currentTenant(c)
	d, err := s.Webhooks.Resend(c.Request().Context(), t.ID, webhookActor(c), id, did)
	if err != nil {
		return err
	}
	s.setFlash(c, i18n.T(c.Request().Context(), "webhooks.flash_resent", d.EventID))
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/t/%s/webhooks/%d", t.Slug, id))
}
