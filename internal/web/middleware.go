package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/clip"
	"github.com/jejakhq/jejak/internal/metrics"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/signin"
	"github.com/jejakhq/jejak/internal/staff"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/tracing"
	"github.com/jejakhq/jejak/internal/user"
)

const (
	sessionUserID = "user_id"
	sessionCSRF   = "csrf"
	ctxTenant     = "tenant"
	ctxMember     = "membership"
	ctxUser       = "user"
)

// csp forbids inline script and framing; htmx is loaded from /static and
// configured through a meta tag, so no 'unsafe-inline' is needed.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// securityHeaders sets the headers every answer carries; behind TLS
// (SecureCookies, or a TLS connection) that includes HSTS.
func (s *Server) securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		if s.SecureCookies || c.Request().TLS != nil {
			h.Set("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
		}
		return next(c)
	}
}

func cacheForever(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("v") != "" {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		}
		h.ServeHTTP(w, r)
	})
}

// maxLoggedPath bounds the request path a log line copies: a line per
// request must not grow with what a stranger sends.
const maxLoggedPath = 512

// traceAndLog gives every request a trace id (from a W3C traceparent header
// when it is valid, so a trace crosses services; a header the specification
// forbids starts a new trace) and logs one JSON line per request with it.
func (s *Server) traceAndLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		r := c.Request()
		trace := tracing.NewTraceID()
		if p, ok := tracing.ParseTraceparent(r.Header.Get("traceparent")); ok {
			trace = p.TraceID
		}
		c.Response().Header().Set(echo.HeaderXRequestID, trace)
		c.SetRequest(r.WithContext(reqctx.WithTrace(r.Context(), trace)))
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		attrs := []any{
			slog.String("trace_id", trace), slog.String("method", metrics.HTTPMethod(r.Method)),
			slog.String("path", clip.Bytes(r.URL.Path, maxLoggedPath)),
			slog.Int("status", c.Response().Status), slog.Duration("duration", time.Since(start)),
		}
		if v := reqctx.ViewerFrom(c.Request().Context()); v != nil {
			attrs = append(attrs, slog.Int64("user_id", v.UserID))
		}
		s.Logger.InfoContext(r.Context(), "request", attrs...)
		return nil
	}
}

// preCSRFCookie holds the random nonce a visitor without a session signs
// its CSRF token with.
const preCSRFCookie = "jejak_csrf"

// csrf refuses every non-safe request that does not echo the right token in
// the _csrf field of the body or the X-CSRF-Token header (htmx sends it via
// hx-headers); a token in the query string is ignored, since URLs end up in
// logs, history and Referer headers. Signed in, the token is a synchronizer
// token kept in the server-side session. Before sign-in it is an HMAC of a
// nonce kept in a cookie (signin.CSRFSigner), so an anonymous page view
// writes no session row. Unlike a Sec-Fetch-Site shortcut, a missing token
// is always refused.
func (s *Server) csrf(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		var token string
		if s.sessions.GetInt64(ctx, sessionUserID) != 0 {
			token = s.sessions.GetString(ctx, sessionCSRF)
			if token == "" {
				token = newCSRFToken()
				s.sessions.Put(ctx, sessionCSRF, token)
			}
		} else {
			nonce := ""
			if ck, err := c.Cookie(preCSRFCookie); err == nil && len(ck.Value) == 43 {
				nonce = ck.Value
			} else {
				nonce = signin.NewNonce()
				c.SetCookie(&http.Cookie{Name: preCSRFCookie, Value: nonce, Path: "/", HttpOnly: true,
					SameSite: http.SameSiteLaxMode, Secure: s.SecureCookies, MaxAge: 12 * 3600})
			}
			var err error
			if token, err = s.CSRF.Token(ctx, nonce); err != nil {
				return err
			}
		}
		switch c.Request().Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			sent := c.Request().Header.Get("X-CSRF-Token")
			if sent == "" {
				sent = c.Request().PostFormValue("_csrf")
			}
			if sent == "" || subtle.ConstantTimeCompare([]byte(sent), []byte(token)) != 1 {
				return echo.NewHTTPError(http.StatusForbidden, "Missing or invalid CSRF token. Reload the page and try again.")
			}
		}
		c.SetRequest(c.Request().WithContext(reqctx.WithCSRF(ctx, token)))
		return next(c)
	}
}

func newCSRFToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// loadViewer puts the signed-in user (if any) into the request context.
func (s *Server) loadViewer(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		id := s.sessions.GetInt64(ctx, sessionUserID)
		if id == 0 {
			return next(c)
		}
		// The session's lookup read the user with it; reading it again is
		// only for a session no sign-in indexed.
		var err error
		u := signin.SessionUser(ctx, id)
		if u == nil {
			u, err = s.Users.Get(ctx, id)
		}
		if errors.Is(err, user.ErrNotFound) || (err == nil && !u.Active) {
			// Account removed or disabled since sign-in: end the session.
			if err := s.sessions.Destroy(ctx); err != nil {
				return err
			}
			return next(c)
		}
		if err != nil {
			return err
		}
		c.Set(ctxUser, u)
		v := &reqctx.Viewer{UserID: u.ID, Name: u.Name, Email: u.Email, StaffRole: u.StaffRole, Grants: staff.Grants(u.StaffRole),
			Zone: user.TimeZone(u.TimeZone)}
		if u.IsStaff() {
			v.ZoneChoices = user.StaffZones
		}
		c.SetRequest(c.Request().WithContext(reqctx.WithViewer(ctx, v)))
		return next(c)
	}
}

func (s *Server) requireViewer(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if viewer(c) == nil {
			if isHTMX(c) {
				c.Response().Header().Set("HX-Redirect", "/login")
				return c.NoContent(http.StatusUnauthorized)
			}
			return c.Redirect(http.StatusSeeOther, "/login")
		}
		// Signed-in pages show one account's data: no cache may keep them.
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		return next(c)
	}
}

// requireStaff admits staff whose role holds the permission the route
// needs (staffPermissions, staff.Can); a route missing from that table is
// refused to everyone.
func (s *Server) requireStaff(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		v := viewer(c)
		if !v.IsStaff() {
			return echo.NewHTTPError(http.StatusForbidden, "This area is for support staff.")
		}
		p, ok := staffPermissions[c.Request().Method+" "+c.Path()]
		if !ok && strings.HasSuffix(c.Path(), "/*") {
			// No staff route matched (echo's catch-all for the group):
			// the page does not exist, whoever asks.
			return echo.ErrNotFound
		}
		if !ok || !staff.Can(v.StaffRole, p) {
			return staff.ErrNotPermitted
		}
		return next(c)
	}
}

// can reports whether the signed-in staff member holds p (for what a
// staff page shows).
func can(c echo.Context, p staff.Permission) bool {
	v := viewer(c)
	return v != nil && staff.Can(v.StaffRole, p)
}

// requireMember resolves /t/:slug and admits members of that tenant only.
// An unknown slug and another tenant's slug both answer 404, so a URL never
// reveals whether a tenant exists.
func (s *Server) requireMember(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, slug, uid := c.Request().Context(), c.Param("slug"), viewer(c).UserID
		t, m, read, err := signin.SessionMember(ctx, slug, uid)
		if !read {
			t, m, err = s.Tenants.Enter(ctx, slug, uid)
		}
		if err != nil {
			return err
		}
		c.Set(ctxTenant, t)
		c.Set(ctxMember, m)
		c.SetRequest(c.Request().WithContext(reqctx.WithMember(c.Request().Context(),
			reqctx.Member{CanWrite: m.CanWrite(), SeesBilling: m.CanSeeBilling()})))
		return next(c)
	}
}

func viewer(c echo.Context) *reqctx.Viewer { return reqctx.ViewerFrom(c.Request().Context()) }

func currentTenant(c echo.Context) *tenant.Tenant { return c.Get(ctxTenant).(*tenant.Tenant) }

func membership(c echo.Context) *tenant.Membership { return c.Get(ctxMember).(*tenant.Membership) }

func isHTMX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

func addSlash(c echo.Context) error {
	return c.Redirect(http.StatusMovedPermanently, c.Request().URL.Path+"/")
}
