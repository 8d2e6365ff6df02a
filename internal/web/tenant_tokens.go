package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/audit"
	viewtenant "github.com/jejakhq/jejak/views/tenant"
)

// memberOrAuditToken admits a request to the audit log's routes either
// through the member's session (the session middlewares, in order) or,
// when it carries an Authorization header, through a read-only audit
// token of the tenant the path names. A token request loads no session
// and sets no cookie.
func (s *Server) memberOrAuditToken(session ...echo.MiddlewareFunc) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		viaSession := next
		for i := len(session) - 1; i >= 0; i-- {
			viaSession = session[i](viaSession)
		}
		viaToken := s.requireAuditToken(next)
		return func(c echo.Context) error {
			if c.Request().Header.Get(echo.HeaderAuthorization) != "" {
				return viaToken(c)
			}
			return viaSession(c)
		}
	}
}

// requireAuditToken resolves /t/:slug and admits a bearer audit token of
// that tenant: revoked 401; unknown or another tenant's 404, as for a
// tenant that does not exist; anything but "Bearer jat_…" 400.
func (s *Server) requireAuditToken(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		t, err := s.Tenants.BySlug(ctx, c.Param("slug"))
		if err != nil {
			return err
		}
		presented, ok := bearerToken(c.Request())
		if !ok {
			return audit.ErrTokenMalformed
		}
		if _, err := s.AuditTokens.Authenticate(ctx, t.ID, presented, c.RealIP()); err != nil {
			if apperr.CodeOf(err) == apperr.CodeUnauthenticated {
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="jejak audit log"`)
			}
			return err
		}
		c.Set(ctxTenant, t)
		return next(c)
	}
}

// auditTokensVM is the witness tokens section as an owner or admin sees
// it.
func (s *Server) auditTokensVM(c echo.Context) (*viewtenant.TokensVM, error) {
	ctx := c.Request().Context()
	t := currentTenant(c)
	tokens, err := s.AuditTokens.List(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, 0, len(tokens))
	for _, tk := range tokens {
		ids = append(ids, tk.CreatedBy)
	}
	names, err := s.Users.Names(ctx, ids)
	if err != nil {
		return nil, err
	}
	loc := t.Location()
	vm := &viewtenant.TokensVM{Slug: t.Slug}
	for _, tk := range tokens {
		r := viewtenant.TokenRow{ID: strconv.FormatInt(tk.ID, 10), Name: tk.Name, CreatedBy: names[tk.CreatedBy],
			Created: shownTime(ctx, tk.CreatedAt.In(loc)), Active: tk.Active()}
		if tk.LastUsedAt != nil {
			r.LastUsed = shownTime(ctx, tk.LastUsedAt.In(loc))
		}
		if tk.RevokedAt != nil {
			r.Revoked = shownTime(ctx, tk.RevokedAt.In(loc))
		}
		vm.Rows = append(vm.Rows, r)
	}
	return vm, nil
}

// witnessCommand is the command line that runs a witness with a new
// token, at the dashboard's address as the owner reached it (docs/audit.md
// has the cron recipe).
func witnessCommand(c echo.Context, slug, token string) string {
	return "JEJAK_AUDIT_TOKEN=" + token + " web audit witness --url " + c.Scheme() + "://" + c.Request().Host +
		" --slug " + slug + " --state ~/.jejak-witness/" + slug
}

// renderTokens answers a token action: the section alone for htmx, else
// the section on a page of its own.
func (s *Server) renderTokens(c echo.Context, status int, vm *viewtenant.TokensVM) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	if isHTMX(c) {
		return render(c, status, viewtenant.TokensSection(*vm))
	}
	t := currentTenant(c)
	return render(c, status, viewtenant.TokensPage(t.Name, *vm))
}

// requireTokenManager refuses members who are not owners or admins.
func requireTokenManager(c echo.Context) error {
	if !membership(c).CanWrite() {
		return echo.NewHTTPError(http.StatusForbidden, "Only owners and admins manage audit tokens.")
	}
	return nil
}

// auditTokens is the tokens section (htmx, when the trail page's box is
// opened) or the tokens page.
func (s *Server) auditTokens(c echo.Context) error {
	if err := requireTokenManager(c); err != nil {
		return err
	}
	vm, err := s.auditTokensVM(c)
	if err != nil {
		return err
	}
	return s.renderTokens(c, http.StatusOK, vm)
}

func (s *Server) auditTokenCreate(c echo.Context) error {
	if err := requireTokenManager(c); err != nil {
		return err
	}
	t := currentTenant(c)
	name := c.FormValue("name")
	tk, secret, err := s.AuditTokens.Create(c.Request().Context(), t.ID, viewer(c).UserID, name)
	if apperr.CodeOf(err) == apperr.CodeInvalid {
		vm, verr := s.auditTokensVM(c)
		if verr != nil {
			return verr
		}
		vm.FormName, vm.NameError = name, fieldMessage(c.Request().Context(), err, "name")
		return s.renderTokens(c, http.StatusUnprocessableEntity, vm)
	}
	if err != nil {
		return err
	}
	vm, err := s.auditTokensVM(c)
	if err != nil {
		return err
	}
	vm.NewSecret, vm.NewName, vm.WitnessCommand = secret, tk.Name, witnessCommand(c, t.Slug, secret)
	return s.renderTokens(c, http.StatusOK, vm)
}

func (s *Server) auditTokenRevoke(c echo.Context) error {
	if err := requireTokenManager(c); err != nil {
		return err
	}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return audit.ErrTokenNotFound
	}
	t := currentTenant(c)
	tk, err := s.AuditTokens.Revoke(c.Request().Context(), t.ID, viewer(c).UserID, id)
	if err != nil {
		return err
	}
	vm, err := s.auditTokensVM(c)
	if err != nil {
		return err
	}
	vm.Revoked = tk.Name
	return s.renderTokens(c, http.StatusOK, vm)
}
