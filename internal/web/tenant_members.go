package web

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/member"
	"github.com/jejakhq/jejak/internal/tenant"
	viewtenant "github.com/jejakhq/jejak/views/tenant"
)

// tenantMembers is the team page: everyone sees the list; owners also get
// the forms.
func (s *Server) tenantMembers(c echo.Context) error {
	vm, err := s.membersVM(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, viewtenant.MembersPage(vm))
}

func (s *Server) membersVM(c echo.Context) (viewtenant.MembersVM, error) {
	ctx := c.Request().Context()
	t, m := currentTenant(c), membership(c)
	ms, invs, err := s.Members.List(ctx, t.ID)
	if err != nil {
		return viewtenant.MembersVM{}, err
	}
	lang, loc := i18n.Lang(ctx), t.Location()
	vm := viewtenant.MembersVM{Slug: t.Slug, TenantName: t.Name, CanManage: m.Role == tenant.RoleOwner,
		Roles: member.Roles, Invitable: member.InviteRoles, FormRole: tenant.RoleMember}
	for _, x := range ms {
		vm.Members = append(vm.Members, viewtenant.MemberRow{UserID: strconv.FormatInt(x.UserID, 10), Name: x.Name, Email: x.Email,
			Role: x.Role, Since: i18n.Date(lang, x.Since.In(loc)), You: x.UserID == viewer(c).UserID, DisabledByStaff: x.DisabledByStaff})
	}
	for _, x := range invs {
		vm.Invites = append(vm.Invites, viewtenant.InviteRow{ID: strconv.FormatInt(x.ID, 10), Email: x.Email, Role: x.Role,
			By: x.InvitedBy, At: i18n.Date(lang, x.CreatedAt.In(loc))})
	}
	return vm, nil
}

// memberInvite invites someone (fields email, role).
func (s *Server) memberInvite(c echo.Context) error {
	ctx := c.Request().Context()
	email, role := c.FormValue("email"), c.FormValue("role")
	inv, err := s.Members.Invite(ctx, currentTenant(c), actorOf(c), viewer(c).Name, email, role)
	flash := ""
	if inv != nil {
		flash = i18n.T(ctx, "members.invited", inv.Email)
	}
	if errors.Is(err, member.ErrMailFailed) {
		s.Logger.ErrorContext(ctx, "invitation mail", "error", err.Error())
		return s.afterMembersChange(c, flash, member.ErrMailFailed.Error(), nil, "", "")
	}
	return s.afterMembersChange(c, flash, "", err, email, role)
}

func (s *Server) memberRole(c echo.Context) error {
	id, err := pathID(c, "user_id")
	if err != nil {
		return err
	}
	err = s.Members.ChangeRole(c.Request().Context(), currentTenant(c).ID, actorOf(c), id, c.FormValue("role"))
	return s.afterMembersChange(c, i18n.T(c.Request().Context(), "members.changed"), "", err, "", "")
}

func (s *Server) memberRemove(c echo.Context) error {
	id, err := pathID(c, "user_id")
	if err != nil {
		return err
	}
	err = s.Members.Remove(c.Request().Context(), currentTenant(c).ID, actorOf(c), id)
	return s.afterMembersChange(c, i18n.T(c.Request().Context(), "members.changed"), "", err, "", "")
}

func (s *Server) invitationRevoke(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	err = s.Members.Revoke(c.Request().Context(), currentTenant(c).ID, actorOf(c), id)
	return s.afterMembersChange(c, i18n.T(c.Request().Context(), "members.changed"), "", err, "", "")
}

// afterMembersChange answers a team change: a validation error re-renders
// the page (or, with htmx, its main part) with the message, 422, having
// changed nothing; other errors take the usual error path; success
// redirects (post/redirect/get) or, with htmx, swaps the updated part.
func (s *Server) afterMembersChange(c echo.Context, flash, problem string, err error, email, role string) error {
	status := http.StatusOK
	var fields map[string]string
	switch {
	case apperr.CodeOf(err) == apperr.CodeInvalid:
		status, flash, fields = http.StatusUnprocessableEntity, "", apperr.FieldsOf(err)
	case err != nil:
		return err
	case !isHTMX(c):
		return c.Redirect(http.StatusSeeOther, "/t/"+currentTenant(c).Slug+"/members")
	}
	vm, verr := s.membersVM(c)
	if verr != nil {
		return verr
	}
	vm.Flash, vm.Problem = flash, problem
	if fields != nil {
		vm.Errors, vm.FormEmail = fields, email
		if role != "" {
			vm.FormRole = role
		}
		if msg, ok := fields["user"]; ok {
			vm.Problem = msg
		}
		if msg, ok := fields["role"]; ok && email == "" {
			vm.Problem = msg // a role change's message, shown above the table
		}
	}
	if isHTMX(c) {
		return render(c, status, viewtenant.MembersMain(vm))
	}
	return render(c, status, viewtenant.MembersPage(vm))
}

// pathID reads a positive id path parameter; anything else is a 404.
func pathID(c echo.Context, name string) (int64, error) {
	id, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, tenant.ErrNotFound
	}
	return id, nil
}
