package web

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/incident"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/views/components"
	"github.com/jejakhq/jejak/views/observe"
)

// adminIncident is the incident page: everything one trace id touched,
// across tenants, in time order.
func (s *Server) adminIncident(c echo.Context) error {
	vm := observe.IncidentVM{}
	if _, asked := c.QueryParams()["trace"]; !asked {
		return render(c, http.StatusOK, observe.IncidentPage(vm))
	}
	vm.Searched = true
	vm.Trace = strings.TrimSpace(c.QueryParam("trace"))
	in, err := s.Incidents.Get(c.Request().Context(), vm.Trace)
	var ae *apperr.Error
	if errors.As(err, &ae) && ae.Code == apperr.CodeInvalid {
		vm.TraceError = ae.Fields["trace"]
		return render(c, http.StatusUnprocessableEntity, observe.IncidentPage(vm))
	}
	if err != nil {
		return err
	}
	if err := s.recordIncidentViews(c, in); err != nil {
		return err
	}
	slugs := map[int64]string{}
	for _, t := range in.Tenants {
		slugs[t.ID] = t.Slug
		vm.Tenants = append(vm.Tenants, observe.IncidentTenant{Slug: t.Slug, Name: t.Name})
	}
	vm.CrossTenant = in.CrossTenant()
	vm.Jobs = len(in.Jobs)
	vm.Truncated = in.Truncated
	if in.Starter != nil {
		vm.Starter = in.Starter.Name + " <" + in.Starter.Email + ">"
	}
	ctx := c.Request().Context()
	for _, e := range in.Entries {
		r := observe.IncidentRow{At: components.When(ctx, e.At), Kind: e.Kind, Tenant: slugs[e.TenantID],
			Actor: e.Actor, Title: incidentText(ctx, e.Title), Detail: incidentDetail(ctx, e.Detail), Error: e.Error, Worker: e.Worker, Link: e.Link}
		if e.ActorID != nil {
			if u, ok := in.Users[*e.ActorID]; ok {
				r.Actor = u.Name + " <" + u.Email + ">"
			}
		}
		if e.JobID != 0 {
			r.JobID = strconv.FormatInt(e.JobID, 10)
		}
		vm.Rows = append(vm.Rows, r)
	}
	return render(c, http.StatusOK, observe.IncidentPage(vm))
}

// incidentText words a timeline phrase in the reader's language: its
// catalog entry with codes shown through their enum groups, or its data
// as is.
func incidentText(ctx context.Context, t incident.Text) string {
	if t.Key == "" {
		return t.Raw
	}
	args := make([]any, len(t.Args))
	for i, a := range t.Args {
		if code, ok := a.(incident.Code); ok {
			args[i] = i18n.Enum(ctx, code.Group, code.Value)
			continue
		}
		args[i] = a
	}
	return countedT(ctx, t.Key, args)
}

// incidentDetail joins a timeline row's detail parts.
func incidentDetail(ctx context.Context, parts []incident.Text) string {
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		if s := incidentText(ctx, p); s != "" {
			out = append(out, s)
		}
	}
	return strings.Join(out, " · ")
}

// recordIncidentViews records, in each tenant whose audit events the page
// shows, that this staff member read them (staff.viewed_audit, at most
// once per staff member, tenant and hour).
func (s *Server) recordIncidentViews(c echo.Context, in *incident.Incident) error {
	if s.Support == nil {
		return nil
	}
	var ids []int64
	for _, e := range in.Entries {
		if e.Kind == incident.KindAudit {
			ids = append(ids, e.TenantID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	ctx := c.Request().Context()
	return s.Support.RecordViews(ctx, viewer(c).UserID, reqctx.Trace(ctx), "/admin/search", ids)
}
