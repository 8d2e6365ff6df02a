// Package web is Jejak's HTTP surface: echo routes, middleware and the
// handlers that turn requests into calls on the domain services and render
// templ views. Handlers never see sqlc types.
package web

import (
	"github.com/jejakhq/jejak/internal/anchor"

	"log/slog"
	"net/http"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/alexedwards/scs/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/user"
)

// Deps are the services the handlers use.
type Deps struct {
	App     *pgxpool.Pool // tenant-facing pool (jejak_app)
	System  *pgxpool.Pool // cross-tenant pool (jejak_system) for staff pages
	Users   *user.Service
	Tenants *tenant.Service
	Clock   clock.Clock
	Logger  *slog.Logger
	// SecureCookies marks cookies Secure; set it when served behind TLS.
	SecureCookies bool
	// Jobs is the job engine (enqueue and operator actions); the workers
	// themselves run beside the server, not inside it.
	Jobs *job.Engine
	// StatsMaxAge bounds how stale the staff queue overview may be (one
	// shared snapshot per period, whatever the number of viewers);
	// 0 = job.DefaultStatsMaxAge, negative = fresh on every request (tests).
	StatsMaxAge time.Duration
	// Anchors holds the signed audit checkpoints owners download; nil =
	// no checkpoint route answers (404).
	Anchors *anchor.Store
}

// Server holds the handlers' dependencies.
type Server struct {
	Deps
	sessions *scs.SessionManager
	// Failed sign-ins are limited per e-mail (guessing one account) and,
	// more loosely, per client address (spraying many accounts).
	throttleEmail, throttleIP *throttle
	// stats is the queue overview snapshot shared by all staff viewers.
	stats *job.StatsCache
}

// New builds the echo application with every route registered.
func New(d Deps) *echo.Echo {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Clock == nil {
		d.Clock = clock.Database{}
	}
	sm := scs.New()
	sm.Store = pgxstore.NewWithCleanupInterval(d.App, 30*time.Minute)
	sm.Lifetime = 12 * time.Hour
	sm.IdleTimeout = 2 * time.Hour
	sm.Cookie.Name = "jejak_session"
	sm.Cookie.HttpOnly = true
	sm.Cookie.SameSite = http.SameSiteLaxMode
	sm.Cookie.Secure = d.SecureCookies
	s := &Server{Deps: d, sessions: sm, throttleEmail: newThrottle(5, 15*time.Minute), throttleIP: newThrottle(50, 15*time.Minute)}

	if d.Jobs != nil {
		s.stats = job.NewStatsCache(d.Jobs.Overview, d.StatsMaxAge)
	}

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	s.routes(e)
	return e
}
