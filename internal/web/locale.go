package web

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/user"
)

// localeCookie holds the language a visitor chose. A cookie rather than the
// session: choosing a language must not make an anonymous visitor a
// session row, or every anonymous POST /locale would write one.
const localeCookie = "jejak_locale"

// locale picks the language of the answer: the signed-in user's saved
// choice, else the one chosen in this browser (localeCookie), else the
// browser's Accept-Language. Views read it with i18n.T(ctx, ...).
func (s *Server) locale(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		lang := ""
		if u := currentUser(c); u != nil {
			lang = u.Locale
		}
		if lang == "" {
			if ck, err := c.Cookie(localeCookie); err == nil {
				lang = ck.Value
			}
		}
		if !i18n.Valid(lang) {
			lang = i18n.FromAcceptLanguage(c.Request().Header.Get("Accept-Language"))
		}
		c.Response().Header().Add("Vary", "Accept-Language")
		c.SetRequest(c.Request().WithContext(i18n.WithLang(ctx, lang)))
		return next(c)
	}
}

// localeSet saves the reader's language (field locale: "id", "en", or ""
// to follow the browser) on the account when signed in, and in a cookie
// either way (it writes nothing for an anonymous visitor), then returns to
// the page it came from.
func (s *Server) localeSet(c echo.Context) error {
	ctx := c.Request().Context()
	lang := strings.TrimSpace(c.FormValue("locale"))
	if lang != "" && !i18n.Valid(lang) {
		return echo.NewHTTPError(http.StatusUnprocessableEntity, i18n.T(ctx, "Choose Bahasa Indonesia or English."))
	}
	if v := viewer(c); v != nil {
		if err := s.Users.SetLocale(ctx, v.UserID, lang); err != nil {
			return err
		}
	}
	ck := &http.Cookie{Name: localeCookie, Value: lang, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.SecureCookies, MaxAge: 365 * 24 * 3600}
	if lang == "" {
		ck.MaxAge = -1
	}
	c.SetCookie(ck)
	return c.Redirect(http.StatusSeeOther, backTo(c.Request().Referer(), c.Request().Host))
}

// backTo returns the path of the page the chooser was on (the Referer), or
// "/" when it is missing or another site's.
func backTo(referer, host string) string {
	u, err := url.Parse(referer)
	if err != nil || referer == "" || u.Host != host || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return "/"
	}
	return u.RequestURI()
}

// currentUser is the signed-in account as loaded by loadViewer, or nil.
func currentUser(c echo.Context) *user.User {
	u, _ := c.Get(ctxUser).(*user.User)
	return u
}

// staffTimeZone saves the zone a staff member reads staff pages in (field
// time_zone, an IANA name; "UTC" or "" for UTC), then returns to the page
// it came from.
func (s *Server) staffTimeZone(c echo.Context) error {
	if err := s.Users.SetTimeZone(c.Request().Context(), viewer(c).UserID, c.FormValue("time_zone")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, backTo(c.Request().Referer(), c.Request().Host))
}
