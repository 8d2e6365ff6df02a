package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/signin"
	"github.com/jejakhq/jejak/internal/user"
	"github.com/jejakhq/jejak/views/auth"
	viewtenant "github.com/jejakhq/jejak/views/tenant"
)

func (s *Server) loginForm(c echo.Context) error {
	if viewer(c) != nil {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	return render(c, http.StatusOK, auth.LoginPage(auth.LoginVM{}))
}

func (s *Server) login(c echo.Context) error {
	ctx := c.Request().Context()
	email := user.NormalizeEmail(c.FormValue("email"))
	password := c.FormValue("password")
	if email == "" || password == "" || len(email) > 254 || len(password) > 1024 {
		return render(c, http.StatusUnprocessableEntity, auth.LoginPage(auth.LoginVM{Email: email, Error: "Enter your e-mail and password."}))
	}
	ip := c.RealIP()
	device := ""
	if ck, err := c.Cookie(deviceCookie); err == nil {
		device = ck.Value
	}
	res, err := s.SignIn.SignIn(ctx, signin.Attempt{Email: email, Password: password, IP: ip, Device: device})
	var throttled *signin.Throttled
	switch {
	case errors.As(err, &throttled):
		c.Response().Header().Set("Retry-After", fmt.Sprint(int(throttled.RetryAfter.Seconds())+1))
		return render(c, http.StatusTooManyRequests, auth.LoginPage(auth.LoginVM{Email: email,
			Error: i18n.T(c.Request().Context(), "Too many failed sign-ins. Try again in %d minutes.", int(throttled.RetryAfter.Minutes())+1)}))
	case errors.Is(err, user.ErrBusy):
		c.Response().Header().Set("Retry-After", "1")
		return render(c, http.StatusServiceUnavailable, auth.LoginPage(auth.LoginVM{Email: email,
			Error: "Sign-in is busy. Try again in a moment."}))
	case errors.Is(err, user.ErrInvalidCredentials):
		// The service records the failure in the account's tenants after
		// this answer, the same way for an unknown e-mail (which then
		// writes nothing).
		s.logSignIn(ctx, res.User, false, ip)
		return render(c, http.StatusUnauthorized, auth.LoginPage(auth.LoginVM{Email: email, Error: "Invalid e-mail or password."}))
	case err != nil:
		return err
	}
	u := res.User
	// This browser is now a known device of the account: its attempts
	// spend their own budget, not the one strangers can use up. Only the
	// sign-in form reads it.
	c.SetCookie(&http.Cookie{Name: deviceCookie, Value: res.Device, Path: "/login", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.SecureCookies, MaxAge: 180 * 24 * 3600})
	// A new session id on sign-in defeats session fixation; a new CSRF
	// token goes with it.
	if err := s.sessions.RenewToken(ctx); err != nil {
		return err
	}
	s.sessions.Put(ctx, sessionUserID, u.ID)
	s.sessions.Put(ctx, sessionCSRF, newCSRFToken())
	// Indexed by user so an approved access revocation can end it.
	if err := s.Users.TrackSession(ctx, s.sessions.Token(ctx), u.ID); err != nil {
		return err
	}
	s.logSignIn(ctx, u, true, ip)
	if err := s.Tenants.RecordSignIn(ctx, u.ID, true, ip, reqctx.Trace(ctx)); err != nil {
		s.Logger.ErrorContext(ctx, "record sign-in", "error", err.Error(), "trace_id", reqctx.Trace(ctx))
	}
	if u.IsStaff() {
		return c.Redirect(http.StatusSeeOther, "/admin")
	}
	return c.Redirect(http.StatusSeeOther, "/")
}

// deviceCookie names the account that last signed in from this browser
// (signin.Result.Device).
const deviceCookie = "jejak_device"

// logSignIn logs a sign-in attempt. An unknown e-mail belongs to no
// tenant: it is logged, never stored as a user.
func (s *Server) logSignIn(ctx context.Context, u *user.User, ok bool, ip string) {
	trace := reqctx.Trace(ctx)
	if u == nil {
		s.Logger.WarnContext(ctx, "sign-in failed for unknown e-mail", "trace_id", trace, "ip", ip)
		return
	}
	s.Logger.InfoContext(ctx, "sign-in", "ok", ok, "user_id", u.ID, "trace_id", trace, "ip", ip)
}

func (s *Server) logout(c echo.Context) error {
	if err := s.sessions.Destroy(c.Request().Context()); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/login")
}

// start sends a signed-in user where they work: staff to /admin, a member
// of one tenant straight to it, others to a chooser.
func (s *Server) start(c echo.Context) error {
	v := viewer(c)
	if s.pendingInvitations(c) {
		return c.Redirect(http.StatusSeeOther, "/invitations")
	}
	ts, err := s.Tenants.TenantsOf(c.Request().Context(), v.UserID)
	if err != nil {
		return err
	}
	if len(ts) == 1 {
		return c.Redirect(http.StatusSeeOther, "/t/"+ts[0].Slug+"/")
	}
	if len(ts) == 0 && v.IsStaff() {
		return c.Redirect(http.StatusSeeOther, "/admin")
	}
	choices := make([]viewtenant.TenantChoice, len(ts))
	for i, t := range ts {
		choices[i] = viewtenant.TenantChoice{Slug: t.Slug, Name: t.Name, Role: strings.ToLower(t.Role)}
	}
	return render(c, http.StatusOK, viewtenant.ChooserPage(choices))
}
