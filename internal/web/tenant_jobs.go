package web

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/console"
	"github.com/jejakhq/jejak/internal/i18n"
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

// jobsLink is the jobs page with a state and a kind filter (either may be
// empty) and, when before is not "", a cursor.
func jobsLink(base string, state job.State, kind, before string) string {
	q := url.Values{}
	if state != "" {
		q.Set("state", string(state))
	}
	if kind != "" {
		q.Set("kind", kind)
	}
	if before != "" {
		q.Set("before", before)
	}
	if len(q) == 0 {
		return base
	}
	return base + "?" + q.Encode()
}

// tenantJobTabs builds the state tabs, each keeping the kind filter and
// showing its count when counts were read (nil when the filter was
// refused).
func tenantJobTabs(ctx context.Context, base string, state job.State, kind string, counts []console.StateCount) []viewtenant.JobTab {
	tabs := make([]viewtenant.JobTab, 0, len(jobTabs))
	for i, tab := range jobTabs {
		t := viewtenant.JobTab{Label: tab.label, URL: jobsLink(base, tab.state, kind, ""), Current: tab.state == state}
		if i < len(counts) {
			t.Count = i18n.Number(ctx, counts[i].N)
			if counts[i].AtLeast {
				t.Count += "+"
			}
		}
		tabs = append(tabs, t)
	}
	return tabs
}

// tenantJobs lists the tenant's own jobs by state and kind, newest first,
// keyset on the job id, with each state tab's count; read-only for every
// member. The console reads them in the tenant's transaction, so
// row-level security applies. A bad state or kind answers 422 with the
// message by the field, and nothing is read.
func (s *Server) tenantJobs(c echo.Context) error {
	ctx := c.Request().Context()
	t := currentTenant(c)
	loc := t.Location()
	state := job.State(c.QueryParam("state"))
	kind := strings.TrimSpace(c.QueryParam("kind"))
	base := "/t/" + t.Slug + "/jobs"
	vm := viewtenant.JobsVM{Slug: t.Slug, TenantName: t.Name, Zone: zoneLabel(loc), State: string(state),
		Kind: kind, FilterURL: base, KindMax: job.MaxKindLen}
	before, err := keyset.Cursor("before", c.QueryParam("before"))
	if err != nil {
		return err
	}
	res, err := s.Console.TenantJobsWithCounts(ctx, t.ID, console.TenantJobQuery{State: string(state), Kind: kind}, before)
	if fields := fieldMessages(ctx, err); fields != nil {
		vm.StateError, vm.KindError = fields["state"], fields["kind"]
		vm.Tabs = tenantJobTabs(ctx, base, state, kind, nil)
		return render(c, http.StatusUnprocessableEntity, viewtenant.JobsPage(vm))
	}
	if err != nil {
		return err
	}
	vm.Tabs = tenantJobTabs(ctx, base, state, kind, res.Counts)
	if res.Next > 0 {
		vm.OlderURL = jobsLink(base, state, kind, strconv.FormatInt(res.Next, 10))
	}
	if before > 0 {
		vm.NewestURL = jobsLink(base, state, kind, "")
	}
	if res.SearchedFrom > 0 {
		vm.SearchedFrom = strconv.FormatInt(res.SearchedFrom, 10)
	}
	for _, j := range res.Rows {
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
