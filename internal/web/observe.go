package web

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"

	"github.com/jejakhq/jejak/internal/metrics"
	"github.com/jejakhq/jejak/internal/reqctx"
	"github.com/jejakhq/jejak/internal/tracing"
)

// observeRequest runs inside traceAndLog (which settled the request's
// trace id): it returns the trace to the caller as a W3C traceparent and
// X-Trace-Id, counts the request by route pattern and, when spans are
// exported, wraps it in a server span joined to the caller's.
func (s *Server) observeRequest(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		r := c.Request()
		ctx := r.Context()
		trace := reqctx.Trace(ctx)
		parent, _ := tracing.ParseTraceparent(r.Header.Get("traceparent"))
		if parent.TraceID != trace {
			parent.SpanID = "" // the id was not taken from this header
		}
		method := spanMethod(r.Method)
		ctx, span := tracing.Start(ctx, "HTTP "+method, parent.SpanID, attribute.String("http.request.method", method))
		spanID := span.SpanID()
		if spanID == "" {
			spanID = tracing.NewSpanID()
		}
		h := c.Response().Header()
		h.Set("X-Trace-Id", trace)
		if tracing.IsW3CTraceID(trace) {
			h.Set("traceparent", tracing.Traceparent(trace, spanID, true))
		}
		c.SetRequest(r.WithContext(ctx))
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		route := c.Path()
		span.Set(attribute.String("http.route", route), attribute.Int("http.response.status_code", c.Response().Status))
		span.End(err)
		s.Metrics.ObserveHTTP(route, r.Method, c.Response().Status, time.Since(start))
		return nil
	}
}

// spanMethod is the method as OpenTelemetry's HTTP conventions name it:
// one of the known methods, else "_OTHER" (never the request's own bytes).
func spanMethod(m string) string {
	if m = metrics.HTTPMethod(m); m == metrics.MethodOther {
		return "_OTHER"
	}
	return m
}

// metricsEndpoint serves Prometheus metrics to a scraper that presents
// JEJAK_METRICS_TOKEN as a bearer token, or, when no token is configured,
// to loopback callers only: the TCP peer is loopback and the request
// carries no forwarding header. A reverse proxy on the same host connects
// from loopback too; the header it adds is what tells its relayed requests
// (from anywhere) apart from a local scraper's.
func (s *Server) metricsEndpoint(c echo.Context) error {
	if s.MetricsToken != "" {
		got, ok := bearerToken(c.Request())
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.MetricsToken)) != 1 {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="metrics"`)
			return c.String(http.StatusUnauthorized, "metrics need a bearer token\n")
		}
	} else if !loopbackPeer(c.Request().RemoteAddr) || forwarded(c.Request().Header) {
		return c.String(http.StatusForbidden, "metrics are served to direct loopback callers only when JEJAK_METRICS_TOKEN is unset (behind a proxy, set the token)\n")
	}
	s.Metrics.Handler().ServeHTTP(c.Response(), c.Request())
	return nil
}

// forwardingHeaders are the headers a relaying proxy adds (RFC 7239, the
// de-facto X-Forwarded-* family, RFC 9110 Via).
var forwardingHeaders = []string{
	"Forwarded", "Via", echo.HeaderXRealIP, echo.HeaderXForwardedFor, "X-Forwarded-Host",
	echo.HeaderXForwardedProto, "X-Forwarded-Port", "X-Forwarded-Server", "X-Forwarded-Prefix",
	echo.HeaderXForwardedSsl, "X-Original-Forwarded-For", "True-Client-Ip", "Cf-Connecting-Ip",
}

// forwarded reports whether a proxy relayed the request: any forwarding
// header present, even empty (a proxy that blanks X-Forwarded-For still
// relays).
func forwarded(h http.Header) bool {
	for _, k := range forwardingHeaders {
		if _, ok := h[http.CanonicalHeaderKey(k)]; ok {
			return true
		}
	}
	return false
}

func loopbackPeer(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bearerToken is the credential of an "Authorization: Bearer …" header
// (the scheme is case-insensitive, RFC 9110); ok is false without one.
func bearerToken(r *http.Request) (token string, ok bool) {
	scheme, token, ok := strings.Cut(r.Header.Get(echo.HeaderAuthorization), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}
