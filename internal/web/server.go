// Package web is Jejak's HTTP surface: echo routes, middleware and the
// handlers that turn requests into calls on the domain services and render
// templ views. Handlers never see sqlc types.
package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/alert"
	"github.com/jejakhq/jejak/internal/approval"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/console"
	"github.com/jejakhq/jejak/internal/incident"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/member"
	"github.com/jejakhq/jejak/internal/metrics"
	"github.com/jejakhq/jejak/internal/outboxconsole"
	"github.com/jejakhq/jejak/internal/payment"
	"github.com/jejakhq/jejak/internal/schedule"
	"github.com/jejakhq/jejak/internal/signin"
	"github.com/jejakhq/jejak/internal/support"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/user"
	"github.com/jejakhq/jejak/internal/webhook"
)

// Pinger reports whether the database answers (readiness).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Deps are the services the handlers use. Handlers reach data only through
// them: each service opens its own tenant-scoped or system transaction, so
// no handler can forget to set the tenant.
type Deps struct {
	// DB answers the readiness check.
	DB Pinger
	// Sessions stores sessions: the sessions table in production; nil keeps
	// them in memory.
	Sessions scs.Store
	Users    *user.Service
	Tenants  *tenant.Service
	Audit    *audit.Service
	// AuditTokens are the read-only tokens a witness reads the log with.
	AuditTokens *audit.Tokens
	// Console is the staff's view of the job engine and a tenant's list of
	// its own jobs; the workers themselves run beside the server.
	Console *console.Service
	// Members is the team page's service (invitations go through its mailer).
	Members *member.Service
	Clock   clock.Clock
	Logger  *slog.Logger
	// SecureCookies marks cookies Secure; set it when served behind TLS.
	SecureCookies bool
	// StatsMaxAge bounds how stale the staff queue overview may be (one
	// shared snapshot per period, whatever the number of viewers);
	// 0 = console.DefaultStatsMaxAge, negative = fresh on every request (tests).
	StatsMaxAge time.Duration
	// Metrics is the Prometheus registry /metrics serves and HTTP requests
	// are counted in; nil = a registry with HTTP and process metrics only.
	Metrics *metrics.Registry
	// Alerts reads alert rule states for /admin/alerts and /admin.
	Alerts *alert.Service
	// Incidents reads everything one trace touched (the incident page).
	Incidents *incident.Service
	// MetricsToken is the bearer token /metrics requires; "" = loopback only.
	MetricsToken string
	// Webhooks is the tenant webhook service (/t/{slug}/webhooks).
	Webhooks *webhook.Service
	// Outbox is the staff view and repair of the outbox (/admin/outbox).
	Outbox *outboxconsole.Console
	// SignIn checks passwords behind the shared sign-in throttle.
	SignIn *signin.Service
	// CSRF signs the token of visitors who have no session yet.
	CSRF *signin.CSRFSigner
	// TrustedProxies are the peers whose X-Forwarded-For names the real
	// client; from anyone else the header is ignored. Empty = the TCP peer
	// is the client.
	TrustedProxies []*net.IPNet
	// Timeouts bound connections; zero = DefaultTimeouts.
	Timeouts *Timeouts
	// Approvals holds two-person actions; Support reads a tenant for
	// staff (both on the system pool).
	Approvals *approval.Service
	Support   *support.Service
	// Payments serves the billing page and on-demand reconciliation;
	// nil = billing shows nothing to reconcile.
	Payments *payment.Service
	// Schedules lists periodic work on /admin; nil = not shown.
	Schedules *schedule.Scheduler
	// Controls pauses and resumes kinds and queues (the job engine).
	Controls JobControls
}

// JobControls is the part of the job engine that pauses and resumes work.
type JobControls interface {
	Pause(ctx context.Context, scope, name, reason string, actorID int64) error
	Resume(ctx context.Context, scope, name, reason string, actorID int64) error
	// PausesRead and PauseLogRead list what is paused and the latest
	// pauses and resumes, as reads that console.ReadTogether sends with a
	// page's others.
	PausesRead(ctx context.Context, out *[]job.Pause) console.Read
	PauseLogRead(ctx context.Context, limit int, out *[]job.PauseEvent) console.Read
}

// Server holds the handlers' dependencies.
type Server struct {
	Deps
	sessions *scs.SessionManager
	timeouts Timeouts
	// stats is the queue overview snapshot shared by all staff viewers.
	stats *console.StatsCache
	// words are audit rows' sentences and details, made once per event.
	words *wordCache
}

// New builds the echo application with every route registered.
func New(d Deps) *echo.Echo {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Clock == nil {
		d.Clock = clock.Database{}
	}
	if d.Metrics == nil {
		d.Metrics = metrics.New(metrics.Options{})
	}
	sm := scs.New()
	if d.Sessions != nil {
		sm.Store = d.Sessions
	}
	// Values in key order: an unchanged session encodes to the bytes it
	// was read as, so it is not written back.
	sm.Codec = signin.SessionCodec{}
	sm.Lifetime = 12 * time.Hour
	sm.IdleTimeout = 2 * time.Hour
	sm.Cookie.Name = "jejak_session"
	sm.Cookie.HttpOnly = true
	sm.Cookie.SameSite = http.SameSiteLaxMode
	sm.Cookie.Secure = d.SecureCookies
	sm.ErrorFunc = func(w http.ResponseWriter, r *http.Request, err error) {
		// The session store shares the pool: a busy pool is a 503.
		status := http.StatusInternalServerError
		if errors.Is(err, context.DeadlineExceeded) {
			status = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", "5")
		} else {
			d.Logger.ErrorContext(r.Context(), "session store", "error", err.Error())
		}
		http.Error(w, http.StatusText(status), status)
	}
	s := &Server{Deps: d, sessions: sm, timeouts: DefaultTimeouts, words: &wordCache{}}
	if d.Timeouts != nil {
		s.timeouts = *d.Timeouts
	}

	if d.Console != nil {
		s.stats = console.NewStatsCache(d.Console.Overview, d.StatsMaxAge)
	}

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.IPExtractor = ipExtractor(d.TrustedProxies)
	s.routes(e)
	return e
}

// ipExtractor believes X-Forwarded-For only from the trusted proxies
// (echo's default extractor believes it from anyone, so a client could
// pick the address the sign-in throttle counts against).
func ipExtractor(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// loadAndSave is the session middleware, with room in the request for
// what the store read, so a page that changes nothing does not write its
// session back (signin.SessionStore.CommitCtx). On a tenant's page (the
// route has a slug; echo has routed before a group's middleware runs) the
// store reads the tenant gate with the session, which requireMember then
// takes instead of a query of its own.
func (s *Server) loadAndSave(next echo.HandlerFunc) echo.HandlerFunc {
	load := echo.WrapMiddleware(s.sessions.LoadAndSave)(next)
	return func(c echo.Context) error {
		r := c.Request()
		c.SetRequest(r.WithContext(signin.WithSessionMemo(r.Context(), c.Param("slug"))))
		return load(c)
	}
}
