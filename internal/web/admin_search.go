package web

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/keyset"
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
	if vm.Jobs, err = job.JobsByTrace(ctx, s.System, vm.Trace, keyset.MaxLimit); err != nil {
		return err
	}
	page, err := audit.Search(ctx, s.System, audit.SearchQuery{TraceID: vm.Trace}, 0, keyset.MaxLimit)
	if err != nil {
		return err
	}
	vm.MoreAudit = page.Next != 0
	if vm.Audit, err = s.staffAuditRows(c, page.Rows); err != nil {
		return err
	}
	return render(c, http.StatusOK, admin.SearchPage(vm))
}
