package web

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/views/components"
	"github.com/jejakhq/jejak/views/support"
)

// localArgs shows a sentence's values the reader's way: a duration in
// words ("24 jam"); numbers are grouped by the catalog's printer.
func localArgs(ctx context.Context, args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if d, ok := a.(time.Duration); ok {
			out[i] = i18n.Duration(ctx, d)
			continue
		}
		out[i] = a
	}
	return out
}

// countedT formats a stored sentence (a catalog key and its values) in
// the reader's language: its first whole-number value is what it counts,
// so "1 tenant" and "3 tenants" each read right.
func countedT(ctx context.Context, key string, args []any) string {
	local := localArgs(ctx, args)
	for _, a := range args {
		switch n := a.(type) {
		case int64:
			return i18n.Plural(ctx, key, n, local...)
		case int:
			return i18n.Plural(ctx, key, int64(n), local...)
		}
	}
	return i18n.T(ctx, key, local...)
}

// pauseLogShown is how many pause log entries /admin shows.
const pauseLogShown = 20

// adminExtras builds /admin's sections below the queue figures from r:
// paused kinds and queues, the audit events waiting for the sealer, and
// the periodic schedules with last and next run.
func (s *Server) adminExtras(c echo.Context, r overviewReads) (templ.Component, error) {
	ctx := c.Request().Context()
	vm := support.AdminExtras{Flash: s.popFlash(c), Error: s.sessions.PopString(ctx, sessionFlashError)}
	var err error
	if vm.Sealing, err = s.sealingRows(ctx, r.backlogs); err != nil {
		return nil, err
	}
	for _, st := range r.schedules {
		row := support.ScheduleRow{Name: st.Name, Every: string(st.Every), About: st.About, LastPeriod: st.LastPeriod,
			LastSummary: st.LastSummary, LastWorker: st.LastWorker, NextRun: components.When(ctx, st.NextRun)}
		if key := "schedule." + st.Name + ".desc"; i18n.Has(key) {
			row.About = i18n.T(ctx, key, localArgs(ctx, st.AboutArgs)...)
		}
		if st.LastResult.Key != "" {
			row.LastSummary = countedT(ctx, st.LastResult.Key, st.LastResult.Args)
		}
		if st.LastRun != nil {
			row.LastRun = components.When(ctx, *st.LastRun)
		} else {
			row.LastRun, row.NextRun = i18n.T(ctx, "support.never"), i18n.T(ctx, "support.next_pass")
		}
		vm.Schedules = append(vm.Schedules, row)
	}
	if s.Controls != nil {
		ps, log := r.pauses, r.pauseLog
		var ids []int64
		for _, p := range ps {
			if p.PausedBy != nil {
				ids = append(ids, *p.PausedBy)
			}
		}
		for _, l := range log {
			if l.ActorID != nil {
				ids = append(ids, *l.ActorID)
			}
		}
		names, err := s.Users.Names(ctx, ids)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			row := support.PauseRow{Scope: p.Scope, Name: p.Name, Reason: p.Reason, Auto: p.Auto, Since: components.When(ctx, p.PausedAt)}
			if p.PausedBy != nil {
				row.By = nameOr(ctx, names, *p.PausedBy)
			}
			vm.Pauses = append(vm.Pauses, row)
		}
		for _, l := range log {
			row := support.PauseLogRow{When: components.When(ctx, l.At), Action: l.Action, Scope: l.Scope, Name: l.Name, Reason: l.Reason, By: i18n.T(ctx, "support.automatic")}
			if l.ActorID != nil {
				row.By = nameOr(ctx, names, *l.ActorID)
			}
			vm.PauseLog = append(vm.PauseLog, row)
		}
	}
	return support.Extras(vm), nil
}

// sealingRows lists each tenant's unsealed audit events (backlogs),
// oldest wait first.
func (s *Server) sealingRows(ctx context.Context, backlogs []audit.Backlog) ([]support.SealRow, error) {
	if len(backlogs) == 0 {
		return nil, nil
	}
	names, err := s.Tenants.Names(ctx)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(backlogs, func(a, b audit.Backlog) int { return a.Oldest.Compare(b.Oldest) })
	now := s.now()
	rows := make([]support.SealRow, len(backlogs))
	for i, b := range backlogs {
		slug := names.Slug(b.TenantID)
		wait := max(now.Sub(b.Oldest), 0)
		rows[i] = support.SealRow{Tenant: slug, TenantURL: "/admin/tenants/" + url.PathEscape(slug),
			Events: i18n.Number(ctx, b.Events), Oldest: i18n.Duration(ctx, wait.Round(time.Second)), Late: wait > audit.SealingBehind}
	}
	return rows, nil
}

// adminPause pauses a kind or queue (fields scope, name, reason).
func (s *Server) adminPause(c echo.Context) error { return s.adminPauseAction(c, true) }

// adminResume resumes a paused kind or queue (fields scope, name, reason).
func (s *Server) adminResume(c echo.Context) error { return s.adminPauseAction(c, false) }

func (s *Server) adminPauseAction(c echo.Context, pause bool) error {
	ctx := c.Request().Context()
	scope, name, reason := c.FormValue("scope"), c.FormValue("name"), c.FormValue("reason")
	var err error
	if pause {
		err = s.Controls.Pause(ctx, scope, name, reason, viewer(c).UserID)
	} else {
		err = s.Controls.Resume(ctx, scope, name, reason, viewer(c).UserID)
	}
	if err != nil {
		// Invalid input answers 422, a repeated pause or resume 409, with
		// the message; nothing changed.
		return err
	}
	key := "support.flash_resumed"
	if pause {
		key = "support.flash_paused"
	}
	s.setFlash(c, i18n.T(ctx, key, i18n.Enum(ctx, "scope", scope), name))
	return c.Redirect(http.StatusSeeOther, "/admin")
}
