package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/views/admin"
)

// adminSearch shows everything known for one trace id across tenants: its
// jobs with their attempt history and its audit events.
func (s *Server) adminSearch(c echo.Context) error {
	ctx := c.Request().Context()
	if _, asked := c.QueryParams()["trace"]; !asked {
		names, err := s.Console.Tenants(ctx)
		if err != nil {
			return err
		}
		tenants, _ := adminTenants(names)
		return render(c, http.StatusOK, admin.SearchPage(admin.SearchVM{Tenants: tenants}))
	}
	trace := strings.TrimSpace(c.QueryParam("trace"))
	res, err := s.Console.Trace(ctx, trace)
	tenants, _ := adminTenants(res.Tenants)
	vm := admin.SearchVM{Searched: true, Trace: trace, Tenants: tenants}
	if msg := apperr.FieldsOf(err)["trace"]; msg != "" {
		vm.TraceError = msg
		return render(c, http.StatusUnprocessableEntity, admin.SearchPage(vm))
	}
	if err != nil {
		return err
	}
	vm.Jobs, vm.MoreAudit = adminRows(res.Jobs), res.MoreEvents
	if vm.Audit, err = s.staffAuditRows(c, res.Events); err != nil {
		return err
	}
	vm.SpansTenants = traceTenants(vm) > 1
	if err := s.recordStaffViews(c, "/admin/search", res.Events); err != nil {
		return err
	}
	return render(c, http.StatusOK, admin.SearchPage(vm))
}

// traceTenants counts the tenants a trace's jobs and events belong to. A
// trace id comes from the client (traceparent), so one that spans tenants
// joins unrelated activity and is flagged rather than read as one story.
func traceTenants(vm admin.SearchVM) int {
	seen := map[int64]bool{}
	for _, j := range vm.Jobs {
		seen[j.TenantID] = true
	}
	for _, e := range vm.Audit {
		seen[e.TenantID] = true
	}
	return len(seen)
}
