package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/keyset"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/tenant"
	viewtenant "github.com/jejakhq/jejak/views/tenant"
)

func (s *Server) tenantHome(c echo.Context) error {
	vm, err := s.homeVM(c, true)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, viewtenant.HomePage(vm))
}

// homeVM builds the owner's home; page says whether it is the whole page,
// whose charts read 30 days of figures that the htmx answers (the projects
// section, the plan panel) do not show.
func (s *Server) homeVM(c echo.Context, page bool) (viewtenant.HomeVM, error) {
	t, m := currentTenant(c), membership(c)
	before, err := keyset.Cursor("before", c.QueryParam("before"))
	if err != nil {
		return viewtenant.HomeVM{}, err
	}
	days := 0
	if page {
		days = chartDays
	}
	h, err := s.Tenants.HomePage(c.Request().Context(), t.ID, before, t.Location(), s.now(), days)
	if err != nil {
		return viewtenant.HomeVM{}, err
	}
	vm := viewtenant.HomeVM{Slug: t.Slug, Name: t.Name, Role: m.Role, CanWrite: m.CanWrite(), Loc: t.Location(), PlanCodes: tenant.PlanCodes}
	if page {
		vm.Charts = homeCharts(c, h.Days)
	}
	if plan := h.Plan; plan != nil {
		vm.Plan = &viewtenant.Plan{Code: plan.Code, Status: plan.Status, PeriodEnd: plan.PeriodEnd}
	}
	ps := h.Projects
	for _, p := range ps.Rows {
		vm.Projects = append(vm.Projects, viewtenant.Project{ID: p.ID, Name: p.Name, CreatedAt: p.CreatedAt})
	}
	if ps.Next != 0 {
		vm.OlderProjectsURL = "/t/" + t.Slug + "/?before=" + keyset.Format(ps.Next) + "#projects"
	}
	vm.ProjectsPaged = before > 0
	return vm, nil
}

func actorOf(c echo.Context) tenant.Actor {
	return tenant.Actor{UserID: viewer(c).UserID, Role: membership(c).Role, TraceID: reqctx.Trace(c.Request().Context())}
}

// projectCreate creates a project. With htmx it answers the projects
// section (the list updates in place); without JavaScript it redirects
// (post/redirect/get). A validation error re-renders the form with the
// message next to the field, 422, and changes nothing.
func (s *Server) projectCreate(c echo.Context) error {
	t := currentTenant(c)
	name := c.FormValue("name")
	_, err := s.Tenants.CreateProject(c.Request().Context(), t.ID, actorOf(c), name)
	if apperr.CodeOf(err) == apperr.CodeInvalid {
		vm, verr := s.homeVM(c, !isHTMX(c))
		if verr != nil {
			return verr
		}
		vm.FormName, vm.FormError = name, fieldMessage(c.Request().Context(), err, "name")
		if isHTMX(c) {
			return render(c, http.StatusUnprocessableEntity, viewtenant.Projects(vm))
		}
		return render(c, http.StatusUnprocessableEntity, viewtenant.HomePage(vm))
	}
	if err != nil {
		return err
	}
	return s.afterProjectChange(c)
}

func (s *Server) projectDelete(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return tenant.ErrNotFound
	}
	if _, err := s.Tenants.DeleteProject(c.Request().Context(), currentTenant(c).ID, actorOf(c), id); err != nil {
		return err
	}
	return s.afterProjectChange(c)
}

func (s *Server) afterProjectChange(c echo.Context) error {
	if !isHTMX(c) {
		return c.Redirect(http.StatusSeeOther, "/t/"+currentTenant(c).Slug+"/")
	}
	vm, err := s.homeVM(c, false)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, viewtenant.Projects(vm))
}

// planChange moves the tenant to another plan (owner/admin).
func (s *Server) planChange(c echo.Context) error {
	t := currentTenant(c)
	err := s.Tenants.ChangePlan(c.Request().Context(), t.ID, actorOf(c), c.FormValue("plan"))
	if apperr.CodeOf(err) == apperr.CodeInvalid {
		vm, verr := s.homeVM(c, !isHTMX(c))
		if verr != nil {
			return verr
		}
		vm.PlanError = apperr.FieldsOf(err)["plan"]
		if isHTMX(c) {
			return render(c, http.StatusUnprocessableEntity, viewtenant.PlanPanel(vm))
		}
		return render(c, http.StatusUnprocessableEntity, viewtenant.HomePage(vm))
	}
	if err != nil {
		return err
	}
	if !isHTMX(c) {
		return c.Redirect(http.StatusSeeOther, "/t/"+t.Slug+"/")
	}
	vm, err := s.homeVM(c, false)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, viewtenant.PlanPanel(vm))
}
