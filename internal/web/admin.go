package web

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/alert"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/console"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/schedule"
	"github.com/jejakhq/jejak/views/admin"
	"github.com/jejakhq/jejak/views/observe"
)

// Staff pages: cross-tenant (the console reads through the system pool),
// guarded by requireStaff. This file has the queue overview and the
// helpers the other admin_*.go files share.

const sessionFlash = "flash"

// adminHome is the queue overview. With ?partial=overview (htmx polling)
// it answers only the refreshing part. The figures come from a snapshot
// shared by every viewer (s.stats), so polling does not count the jobs
// table per request.
func (s *Server) adminHome(c echo.Context) error {
	partial := c.QueryParam("partial")
	if partial != "" && partial != "overview" {
		return echo.NewHTTPError(http.StatusBadRequest, "Unknown partial.")
	}
	if s.stats == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "The job engine is not configured.")
	}
	ctx := c.Request().Context()
	o, age, err := s.stats.Get(ctx)
	if err != nil {
		return err
	}
	maxAge := s.StatsMaxAge
	if maxAge == 0 {
		maxAge = console.DefaultStatsMaxAge
	}
	tenants, _ := adminTenants(o.Tenants)
	vm := admin.OverviewVM{O: adminSnapshot(o), Age: age, MaxAge: max(maxAge, 0), Tenants: tenants}
	if partial == "overview" {
		firing, err := s.firingAlerts(ctx)
		if err != nil {
			return err
		}
		vm.Alerts = observe.FiringBanner(firing)
		return render(c, http.StatusOK, admin.Overview(vm))
	}
	r, err := s.readOverview(ctx)
	if err != nil {
		return err
	}
	vm.Alerts = observe.FiringBanner(alertRuleRows(ctx, r.firing))
	if vm.Extra, err = s.adminExtras(c, r); err != nil {
		return err
	}
	return render(c, http.StatusOK, admin.OverviewPage(vm))
}

// overviewReads is what the whole /admin page shows beside the shared
// queue figures.
type overviewReads struct {
	firing    []alert.Status
	backlogs  []audit.Backlog
	schedules []schedule.Status
	pauses    []job.Pause
	pauseLog  []job.PauseEvent
}

// readOverview reads the firing alerts, the sealing backlogs, the
// schedules and the pauses with their log in one round trip: each is one
// statement on the system pool, and none depends on another.
func (s *Server) readOverview(ctx context.Context) (overviewReads, error) {
	var r overviewReads
	reads := []console.Read{s.Audit.BacklogsRead(ctx, &r.backlogs)}
	if s.Alerts != nil {
		reads = append(reads, s.Alerts.FiringRead(ctx, &r.firing))
	}
	if s.Schedules != nil {
		reads = append(reads, s.Schedules.StatusRead(ctx, &r.schedules))
	}
	if s.Controls != nil {
		reads = append(reads, s.Controls.PausesRead(ctx, &r.pauses), s.Controls.PauseLogRead(ctx, pauseLogShown, &r.pauseLog))
	}
	return r, s.Console.ReadTogether(ctx, reads...)
}

func (s *Server) setFlash(c echo.Context, msg string) {
	s.sessions.Put(c.Request().Context(), sessionFlash, msg)
}

func (s *Server) popFlash(c echo.Context) string {
	return s.sessions.PopString(c.Request().Context(), sessionFlash)
}

// safeBack accepts only a local staff path as a redirect target.
func safeBack(back, fallback string) string {
	if (back == "/admin" || strings.HasPrefix(back, "/admin/") || strings.HasPrefix(back, "/admin?")) &&
		!strings.Contains(back, "//") && !strings.ContainsAny(back, "\\\r\n") {
		return back
	}
	return fallback
}

// staffAuditRows converts audit events for the staff tables; the audit
// read already named the actors.
func (s *Server) staffAuditRows(c echo.Context, events []audit.Recorded) []admin.AuditRow {
	out := make([]admin.AuditRow, len(events))
	for i, e := range events {
		r := admin.AuditRow{
			ID: e.ID, TenantID: e.TenantID, Seq: e.Seq, At: e.OccurredAt, ActorKind: string(e.ActorKind),
			Action: e.Action, Entity: e.Entity, EntityID: e.EntityID, Detail: prettyJSON(e.Detail), TraceID: e.TraceID,
		}
		r.Actor = e.ActorName
		if e.ActorKind == audit.ActorStaff {
			r.Actor = staffName(c.Request().Context(), e.ActorName, e.ActorRole)
		}
		if e.JobID != nil {
			r.JobID = *e.JobID
		}
		out[i] = r
	}
	return out
}
