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
	for _, ep := range page.Rows {
		vm.Rows = append(vm.Rows, webhookRow(t.Slug, ep, t.Location(), i18n.Lang(c.Request().Context())))
	}
	if page.Next != 0 {
		vm.OlderURL = "/t/" + t.Slug + "/webhooks?before=" + keyset.Format(page.Next)
	}
	if before != 0 {
		vm.NewestURL = "/t/" + t.Slug + "/webhooks"
	}
	return vm, nil
}

func webhookRow(slug string, ep webhook.Endpoint, loc *time.Location, lang string) viewtenant.WebhookRow {
	base := fmt.Sprintf("/t/%s/webhooks/%d", slug, ep.ID)
	r := viewtenant.WebhookRow{ID: strconv.FormatInt(ep.ID, 10), URL: ep.URL, Events: strings.Join(ep.Events, ", "),
		Enabled: ep.Enabled, DisabledReason: ep.DisabledReason,
		Created: components.Stamp(ep.CreatedAt, loc, lang), DetailURL: base, RotateURL: base + "/rotate"}
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
	ep, ds, err := s.Webhooks.EndpointDeliveries(c.Request().Context(), t.ID, webhookActor(c), id, 50)
	if err != nil {
		return err
	}
	loc, lang := t.Location(), i18n.Lang(c.Request().Context())
	vm := viewtenant.WebhookDeliveriesVM{Slug: t.Slug, TenantName: t.Name, Endpoint: webhookRow(t.Slug, ep, loc, lang), Flash: s.popFlash(c)}
	for _, d := range ds {
		row := viewtenant.WebhookDeliveryRow{ID: strconv.FormatInt(d.ID, 10), EventID: d.EventID, EventType: d.EventType,
			State: d.State, Attempts: strconv.Itoa(d.Attempts), LastStatus: statusText(c.Request().Context(), d.LastStatus), LastError: d.LastError,
			NextAttempt: "—", Created: components.Stamp(d.CreatedAt, loc, lang),
			ResendURL: fmt.Sprintf("/t/%s/webhooks/%d/deliveries/%d/resend", t.Slug, ep.ID, d.ID)}
		if d.NextAttempt != nil && d.State == webhook.StatePending {
			row.NextAttempt = components.Stamp(*d.NextAttempt, loc, lang)
		}
		for _, a := range d.Log {
			row.Log = append(row.Log, viewtenant.WebhookAttemptRow{N: strconv.Itoa(a.N), At: components.Stamp(a.At, loc, lang),
				Status: statusText(c.Request().Context(), a.StatusCode), Latency: a.Latency.String(), Response: a.Response, Error: a.Error})
		}
		vm.Rows = append(vm.Rows, row)
	}
	return render(c, http.StatusOK, viewtenant.WebhookDeliveriesPage(vm))
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
