package web

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/apperr"
	"github.com/jejakhq/jejak/internal/i18n"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/views/layout"
)

// render writes comp with status. It renders into a buffer first so a
// template error becomes a clean 500 instead of half a page.
func render(c echo.Context, status int, comp templ.Component) error {
	buf := templ.GetBuffer()
	defer templ.ReleaseBuffer(buf)
	if err := comp.Render(c.Request().Context(), buf); err != nil {
		return err
	}
	return c.HTMLBlob(status, visibleHTML(buf.Bytes()))
}

// fieldMessage is err's message for a form field in the reader's language
// ("" when the field has none). A message with values (apperr.Invalidf)
// is formatted through the catalogs here; a plain one stays the English
// key, which the view translates.
func fieldMessage(ctx context.Context, err error, field string) string {
	if f, ok := apperr.FormatOf(err, field); ok {
		return i18n.T(ctx, f.Format, f.Args...)
	}
	return apperr.FieldsOf(err)[field]
}

// fieldMessages is fieldMessage for every field of err (nil when err has
// no field messages), for a form that shows each next to its field.
func fieldMessages(ctx context.Context, err error) map[string]string {
	fields := apperr.FieldsOf(err)
	if fields == nil {
		return nil
	}
	out := make(map[string]string, len(fields))
	for field := range fields {
		out[field] = fieldMessage(ctx, err, field)
	}
	return out
}

// statusOf maps an error to its HTTP status: the one place where
// application error codes meet HTTP.
func statusOf(err error) (int, string) {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg, _ := he.Message.(string)
		if msg == "" {
			msg = http.StatusText(he.Code)
		}
		return he.Code, msg
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// The request's deadline passed, most often waiting for a pool
		// connection: the service is busy, not broken.
		return http.StatusServiceUnavailable, "The service is busy. Try again in a moment."
	}
	var ae *apperr.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case apperr.CodeInvalid:
			return http.StatusUnprocessableEntity, ae.Error()
		case apperr.CodeMalformed:
			return http.StatusBadRequest, ae.Message
		case apperr.CodeNotFound:
			return http.StatusNotFound, "Page not found."
		case apperr.CodeConflict:
			return http.StatusConflict, ae.Message
		case apperr.CodeForbidden:
			return http.StatusForbidden, ae.Message
		case apperr.CodeUnauthenticated:
			return http.StatusUnauthorized, ae.Message
		case apperr.CodeTooMany:
			return http.StatusTooManyRequests, ae.Message
		}
	}
	return http.StatusInternalServerError, "Internal error."
}

// handleError renders every error answer. Internal errors are logged with
// the trace id and shown only as "Internal error".
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, msg := statusOf(err)
	var ae *apperr.Error
	if status == http.StatusTooManyRequests && errors.As(err, &ae) {
		c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(ae.RetryAfter.Seconds())))))
	}
	if status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", "5")
		s.Logger.WarnContext(c.Request().Context(), "request shed", "error", err.Error(),
			"trace_id", c.Response().Header().Get(echo.HeaderXRequestID))
	} else if status >= 500 {
		s.Logger.ErrorContext(c.Request().Context(), "request failed", "error", err.Error(),
			"trace_id", c.Response().Header().Get(echo.HeaderXRequestID))
	}
	if status == http.StatusNotFound {
		msg = "Page not found."
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	if rerr := render(c, status, layout.Error(errorPage(c), status, http.StatusText(status), msg)); rerr != nil {
		_ = c.String(status, msg)
	}
}

// errorPage is the shell of an error answer: on a tenant's page (the
// viewer is a member, requireMember ran) the tenant's navigation stays, so
// a refused member still sees where they can go.
func errorPage(c echo.Context) layout.Page {
	if t, ok := c.Get(ctxTenant).(*tenant.Tenant); ok && t != nil {
		return layout.Page{TenantSlug: t.Slug, TenantName: t.Name}
	}
	return layout.Page{}
}
