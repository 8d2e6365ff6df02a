package web

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/views/admin"
)

// traceIDPattern admits the trace ids Jejak makes (32 hex characters) and
// those that arrive from other systems, without spaces or markup.
var traceIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,200}$`)

// adminSearch shows everything known for one trace id across tenants: its
// jobs with their attempt history and its audit events (system pool).
func (s *Server) adminSearch(c echo.Context) error {
	ctx := c.Request().Context()
	tenants, _, err := s.tenantNames(c)
	if err != nil {
		return err
	}
	vm := admin.SearchVM{Tenants: tenants}
	if _, asked := c.QueryParams()["trace"]; !asked {
		return render(c, http.StatusOK, admin.SearchPage(vm))
	}
	vm.Searched = true
	vm.Trace = strings.TrimSpace(c.QueryParam("trace"))
	switch {
	case vm.Trace == "":
		vm.TraceError = "Enter a trace id."
	case !traceIDPattern.MatchString(vm.Trace):
		vm.TraceError = "A trace id has letters, digits and . _ : - only (at most 200)."
	}
	if vm.TraceError != "" {
		return render(c, http.StatusUnprocessableEntity, admin.SearchPage(vm))
	}
	if vm.Jobs, err = job.JobsByTrace(ctx, s.System, vm.Trace, job.MaxListPage); err != nil {
		return err
	}
	page, err := audit.Search(ctx, s.System, audit.SearchQuery{TraceID: vm.Trace}, nil, 200)
	if err != nil {
		return err
	}
	vm.MoreAudit = page.Next != nil
	if vm.Audit, err = s.staffAuditRows(c, page.Events); err != nil {
		return err
	}
	vm.SpansTenants = traceTenants(vm) > 1
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
