package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/staff"
	"github.com/jejakhq/jejak/static"
)

// routes registers every route: reading this function tells the whole HTTP
// surface and which guard protects each part.
func (s *Server) routes(e *echo.Echo) {
	// guardInput bounds and checks the body before any session or CSRF work.
	e.Use(s.traceAndLog, s.observeRequest, middleware.Recover(), compress(), s.securityHeaders, guardInput, s.requestDeadline)

	// Unauthenticated, no session.
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", s.metricsEndpoint) // bearer token, or loopback only
	e.GET("/audit/key", s.auditKey)      // the audit log's public verifier key
	e.GET("/robots.txt", s.robots)
	e.GET("/favicon.ico", s.favicon)
	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static/", cacheForever(http.FileServerFS(filesOnly{static.FS})))))

	// Everything below has a session and CSRF protection on every POST.
	session := []echo.MiddlewareFunc{s.loadAndSave, s.csrf, s.loadViewer, s.locale}
	app := e.Group("", session...)
	app.GET("/login", s.loginForm)
	app.POST("/locale", s.localeSet)
	app.POST("/login", s.login)
	app.POST("/logout", s.logout)

	signedIn := app.Group("", s.requireViewer)
	signedIn.GET("/", s.start)
	signedIn.GET("/invitations", s.myInvitations)
	signedIn.POST("/invitations/:id/accept", s.invitationAccept)

	s.tenantRoutes(signedIn.Group("/t/:slug", s.requireMember))

	// The audit log's checkpoint and proofs: any member with a session, or
	// a read-only audit token (Authorization: Bearer jat_…), which reads
	// these routes and nothing else.
	memberSession := append(append([]echo.MiddlewareFunc{}, session...), s.requireViewer, s.requireMember)
	logs := e.Group("/t/:slug/audit/log", s.memberOrAuditToken(memberSession...))
	logs.GET("/checkpoint", s.auditLogCheckpoint)
	logs.GET("/proof", s.auditLogProof)
	logs.GET("/bundle", s.auditLogBundle)
	logs.GET("/consistency", s.auditLogConsistency)
	logs.GET("/entry", s.auditLogEntry)

	// Staff pages: each route needs the permission staffPermissions names.
	s.staffRoutes(signedIn.Group("/admin", s.requireStaff))
}

// tenantRoutes registers a tenant's pages: membership required, else 404.
func (s *Server) tenantRoutes(t *echo.Group) {
	t.GET("/", s.tenantHome)
	t.GET("", addSlash)
	t.POST("/projects", s.projectCreate)
	t.POST("/projects/:id/delete", s.projectDelete)
	t.POST("/plan", s.planChange)
	// The tenant's audit trail (any member reads it; owners and admins verify it) and its
	// read-only jobs list.
	t.GET("/audit", s.auditTimeline)
	t.GET("/audit/export.csv", s.auditExport(audit.FormatCSV), s.streamDeadline)
	t.GET("/audit/export.jsonl", s.auditExport(audit.FormatJSONLines), s.streamDeadline)
	t.POST("/audit/verify", s.auditVerify)
	// Read-only audit tokens for a witness (owners and admins).
	t.GET("/audit/tokens", s.auditTokens)
	t.POST("/audit/tokens", s.auditTokenCreate)
	t.POST("/audit/tokens/:id/revoke", s.auditTokenRevoke)
	t.GET("/audit/event", s.auditEvent)
	t.GET("/audit/:entity/:id", s.auditEntity)
	t.GET("/jobs", s.tenantJobs)
	// -- the team: any member reads it, owners change it --
	t.GET("/members", s.tenantMembers)
	t.POST("/members/invite", s.memberInvite)
	t.POST("/members/:user_id/role", s.memberRole)
	t.POST("/members/:user_id/remove", s.memberRemove)
	t.POST("/invitations/:id/revoke", s.invitationRevoke)
	// -- billing: owners and admins; members when the owner allows it --
	t.GET("/billing", s.tenantBilling)
	t.POST("/settings/billing-visibility", s.billingVisibility)
	// -- tenant webhooks (owners/admins; members 403) --
	t.GET("/webhooks", s.tenantWebhooks)
	t.POST("/webhooks", s.tenantWebhookCreate)
	t.GET("/webhooks/:id", s.tenantWebhookDeliveries)
	t.POST("/webhooks/:id/enable", s.tenantWebhookSetEnabled(true))
	t.POST("/webhooks/:id/disable", s.tenantWebhookSetEnabled(false))
	t.POST("/webhooks/:id/rotate", s.tenantWebhookRotate)
	t.POST("/webhooks/:id/delete", s.tenantWebhookDelete)
	t.POST("/webhooks/:id/settings", s.tenantWebhookSettings)
	t.POST("/webhooks/:id/recover", s.tenantWebhookRecover)
	t.POST("/webhooks/:id/test", s.tenantWebhookTest)
	t.POST("/webhooks/:id/deliveries/:delivery/resend", s.tenantWebhookResend)
}

// staffPermissions is the permission each staff route needs; staff.Can says
// which staff roles hold it. requireStaff refuses a staff route missing
// here to everyone, so a new route cannot be open by omission.
var staffPermissions = map[string]staff.Permission{
	"GET /admin":                                         staff.Read,
	"GET /admin/jobs":                                    staff.Read,
	"GET /admin/jobs/:id":                                staff.Read,
	"POST /admin/jobs/:id/retry":                         staff.RetryOne,
	"POST /admin/jobs/:id/discard":                       staff.DiscardOne,
	"GET /admin/dead":                                    staff.Read,
	"GET /admin/dead/bulk":                               staff.Bulk,
	"POST /admin/dead/bulk":                              staff.Bulk,
	"GET /admin/tenants":                                 staff.Read,
	"GET /admin/tenants/:slug":                           staff.Read,
	"POST /admin/tenants/:slug/members/:user_id/disable": staff.RequestApproval,
	"POST /admin/tenants/:slug/members/:user_id/lift":    staff.LiftDisable,
	"POST /admin/tenants/:slug/reconcile":                staff.Reconcile,
	"GET /admin/approvals":                               staff.Read,
	"POST /admin/approvals/:id/approve":                  staff.Decide,
	"POST /admin/approvals/:id/reject":                   staff.Decide,
	"POST /admin/pauses":                                 staff.Pause,
	"POST /admin/pauses/resume":                          staff.Pause,
	"GET /admin/outbox":                                  staff.Read,
	// One message needs RetryOne; a tenant's or all need staff.Bulk too
	// (adminOutboxRetry).
	"POST /admin/outbox/retry": staff.RetryOne,
	"GET /admin/alerts":        staff.Read,
	"GET /admin/search":        staff.Read,
	// A staff member's own display preference, not an action on data.
	"POST /admin/timezone": staff.Read,
}

// staffRoutes registers the staff console.
func (s *Server) staffRoutes(adm *echo.Group) {
	adm.GET("", s.adminHome)
	// Jobs across tenants, dead letters and their repair (every action
	// needs a reason and lands in the tenant's audit trail).
	adm.GET("/jobs", s.adminJobs)
	adm.GET("/jobs/:id", s.adminJob)
	adm.POST("/jobs/:id/retry", s.adminJobRetry)
	adm.POST("/jobs/:id/discard", s.adminJobDiscard)
	adm.GET("/dead", s.adminDead)
	adm.GET("/dead/bulk", s.adminDeadBulkPreview)
	adm.POST("/dead/bulk", s.adminDeadBulk)
	// -- staff tenant pages and two-person approvals --
	adm.GET("/tenants", s.adminTenants)
	adm.GET("/tenants/:slug", s.adminTenant)
	adm.POST("/tenants/:slug/members/:user_id/disable", s.adminMemberDisable)
	adm.POST("/tenants/:slug/members/:user_id/lift", s.adminMemberLift)
	adm.POST("/tenants/:slug/reconcile", s.adminTenantReconcile)
	adm.GET("/approvals", s.adminApprovals)
	adm.POST("/approvals/:id/approve", s.adminApprove)
	adm.POST("/approvals/:id/reject", s.adminReject)
	adm.POST("/pauses", s.adminPause)
	adm.POST("/pauses/resume", s.adminResume)
	// -- outbox, alerts, the incident page (one trace across tenants) --
	adm.GET("/outbox", s.adminOutbox)
	adm.POST("/outbox/retry", s.adminOutboxRetry)
	adm.GET("/alerts", s.adminAlerts)
	adm.GET("/search", s.adminIncident)
	// -- the staff member's own time zone for staff pages --
	adm.POST("/timezone", s.staffTimeZone)
}
