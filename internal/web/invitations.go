package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/reqctx"
	viewtenant "github.com/jejakhq/jejak/views/tenant"
)

// myInvitations lists the invitations addressed to the signed-in person's
// e-mail, and the organisations they already belong to.
func (s *Server) myInvitations(c echo.Context) error {
	ctx := c.Request().Context()
	v := viewer(c)
	invs, err := s.Members.InvitationsFor(ctx, v.Email)
	if err != nil {
		return err
	}
	ts, err := s.Tenants.TenantsOf(ctx, v.UserID)
	if err != nil {
		return err
	}
	lang := i18n.Lang(ctx)
	rows := make([]viewtenant.InvitedRow, len(invs))
	for i, inv := range invs {
		rows[i] = viewtenant.InvitedRow{ID: strconv.FormatInt(inv.ID, 10), TenantName: inv.TenantName, Role: inv.Role,
			By: inv.InvitedBy, At: i18n.Date(lang, inv.CreatedAt)}
	}
	choices := make([]viewtenant.TenantChoice, len(ts))
	for i, t := range ts {
		choices[i] = viewtenant.TenantChoice{Slug: t.Slug, Name: t.Name, Role: strings.ToLower(t.Role)}
	}
	return render(c, http.StatusOK, viewtenant.InvitationsPage(rows, choices))
}

// invitationAccept joins the tenant that invited the signed-in person's
// address; another address's invitation is a 404.
func (s *Server) invitationAccept(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	v := viewer(c)
	slug, err := s.Members.Accept(ctx, v.UserID, v.Email, id, reqctx.Trace(ctx))
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/t/"+slug+"/")
}

// pendingInvitations reports whether invitations wait for the viewer (the
// start page shows them first).
func (s *Server) pendingInvitations(c echo.Context) bool {
	invs, err := s.Members.InvitationsFor(c.Request().Context(), viewer(c).Email)
	return err == nil && len(invs) > 0
}
