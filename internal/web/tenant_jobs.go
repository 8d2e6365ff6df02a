package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/keyset"
	viewtenant "github.com/jejakhq/jejak/views/tenant"
)

// jobTabs are "All" and then one tab per state, in lifecycle order.
var jobTabs = func() []jobTab {
	tabs := []jobTab{{"All", ""}}
	for _, st := range job.States {
		tabs = append(tabs, jobTab{strings.ToUpper(string(st[:1])) + string(st[1:]), st})
	}
	return tabs
}()

type jobTab struct {
	label string
	state job.State
}

// tenantJobs lists the tenant's own jobs by state, newest first, keyset on
// the job id; read-only for every member. The console reads them in the
// tenant's transaction, so row-level security applies.
func (s *Server) tenantJobs(c echo.Context) error {
	ctx := c.Request().Context()
	t := currentTenant(c)
	loc := t.Location()
	state := job.State(c.QueryParam("state"))
	base := "/t/" + t.Slug + "/jobs"
	vm := viewtenant.JobsVM{Slug: t.Slug, TenantName: t.Name, Zone: zoneLabel(loc), State: string(state)}
	for _, tab := range jobTabs {
		u := base
		if tab.state != "" {
			u += "?state=" + string(tab.state)
		}
		vm.Tabs = append(vm.Tabs, viewtenant.JobTab{Label: tab.label, URL: u, Current: tab.state == state})
	}
	if state != "" && !job.ValidState(state) {
		vm.StateError = "Unknown state: choose pending, running, succeeded, dead or cancelled."
		return render(c, http.StatusUnprocessableEntity, viewtenant.JobsPage(vm))
	}
	before, err := keyset.Cursor("before", c.QueryParam("before"))
	if err != nil {
		return err
	}
	page, err := s.Console.TenantJobs(ctx, t.ID, state, before)
	if err != nil {
		return err
	}
	withState := func(extra string) string {
		q := ""
		if state != "" {
			q = "state=" + string(state)
		}
		if extra == "" {
			return linkWith(base, q, "", "")
		}
		return linkWith(base, q, "before", extra)
	}
	if page.Next > 0 {
		vm.OlderURL = withState(strconv.FormatInt(page.Next, 10))
	}
	if before > 0 {
		vm.NewestURL = withState("")
	}
	for _, j := range page.Rows {
		r := viewtenant.JobRow{
			ID: j.ID, Kind: j.Kind, Queue: j.Queue, State: string(j.State), Attempt: j.Attempt,
			MaxAttempts: j.MaxAttempts, LastError: j.LastError, Class: string(j.Class),
			Created: shownTime(ctx, j.CreatedAt.In(loc)), Available: shownTime(ctx, j.AvailableAt.In(loc)),
			TraceID: j.TraceID,
		}
		if j.FinishedAt != nil {
			r.Finished = shownTime(ctx, j.FinishedAt.In(loc))
		}
		vm.Rows = append(vm.Rows, r)
	}
	return render(c, http.StatusOK, viewtenant.JobsPage(vm))
}
