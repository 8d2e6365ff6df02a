// Package kinds registers every job kind Jejak ships on an engine, with
// each kind's options, so wiring code (cmd/web) needs one call and the list
// of kinds lives in one place.
package kinds

import (
	"time"

	"github.com/jejakhq/jejak/internal/approval"
	"github.com/jejakhq/jejak/internal/billing"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/mail"
	"github.com/jejakhq/jejak/internal/payment"
	"github.com/jejakhq/jejak/internal/points"
	"github.com/jejakhq/jejak/internal/webhook"
)

// The shipped kinds' names, as stored in jobs.kind.
const (
	EmailWeeklyReport = mail.WeeklyReportKind      // "email.weekly-report"
	SubscriptionSweep = billing.SweepKind          // "subscription.sweep"
	PointsAward       = points.Kind                // "points.award"
	DisableAccess     = approval.DisableAccessKind // "user.disable-access"
	PaymentCharge     = payment.ChargeKind         // "payment.charge"
	PaymentReconcile  = payment.ReconcileKind      // "payment.reconcile"
	WebhookDeliver    = webhook.Kind               // "webhook.deliver"
)

// KindOptions are per-kind engine settings.
type KindOptions = job.KindOptions

// Registrar is the part of the engine Register needs.
type Registrar interface {
	Register(kind string, h job.Handler, opts KindOptions)
}

// Deps are what the shipped handlers need.
type Deps struct {
	// App is the jejak_app pool: handlers do their work under row-level
	// security pinned to the job's tenant. Required.
	App database.Beginner
	// System is the jejak_system pool, used only by system-requested
	// all-tenant sweeps; nil disables them.
	System database.Beginner
	// Clock is the engine's clock (nil = database now()).
	Clock clock.Clock
	// Mailer sends e-mail; nil = the dev sink on App (see mail.FromEnv).
	Mailer mail.Mailer
	// MailFrom is the sender of Jejak's mail; "" = mail.DefaultFrom.
	MailFrom string
	// Payments runs payment.charge and payment.reconcile; nil leaves
	// them unregistered.
	Payments *payment.Service
	// Jobs enqueues follow-up jobs (webhook retries); nil leaves
	// webhook.deliver unregistered.
	Jobs webhook.Enqueuer
	// WebhookGuard decides which addresses webhooks may reach.
	WebhookGuard webhook.Guard
	// WebhookOutcome, when set, is told each webhook attempt's outcome.
	WebhookOutcome func(outcome string)
	// Webhooks, when set, is the engine working webhook.Queue with
	// delivery workers of its own; webhook.deliver is registered on it as
	// well (jobs of the default queue, enqueued before isolation, still run
	// on the main engine).
	Webhooks Registrar
	// WebhookTenantLimit caps one tenant's deliveries in flight per
	// process (webhook.Deliverer.TenantLimit; 0 = none).
	WebhookTenantLimit int
	// WebhookBreaker configures the per-endpoint circuit breaker (zero
	// fields: webhook.DefaultBreaker's).
	WebhookBreaker webhook.Breaker
	// WebhookSealer opens the endpoints' sealed signing secrets.
	WebhookSealer *webhook.Sealer
}

// Options holds each shipped kind's settings: mail may wait out an SMTP
// outage for a while; the sweep is cheap and reruns on its schedule anyway;
// an award is a few inserts.
var Options = map[string]KindOptions{
	EmailWeeklyReport: {MaxAttempts: 5, Timeout: time.Minute},
	SubscriptionSweep: {MaxAttempts: 3, Timeout: 2 * time.Minute},
	PointsAward:       {MaxAttempts: 5, Timeout: 30 * time.Second},
	// Sensitive: every stage in the tenant's trail; re-authorized at
	// dequeue, so a retry after a lost approver is rejected, not run.
	DisableAccess: {MaxAttempts: 3, Timeout: 30 * time.Second, Sensitive: true},
	// A charge retries a lost answer a few times (reconciliation refunds
	// any double charge); its stages are in the tenant's trail.
	PaymentCharge:    {MaxAttempts: 5, Timeout: time.Minute, Sensitive: true},
	PaymentReconcile: {MaxAttempts: 5, Timeout: 5 * time.Minute},
	// One attempt per job (retries on the webhook schedule are new jobs);
	// the job's own attempts only cover database trouble.
	WebhookDeliver: {MaxAttempts: 3, Timeout: time.Minute},
}

// Register adds every shipped kind's handler to e. It panics when d.App is
// nil: that is a wiring bug, found at start-up.
func Register(e Registrar, d Deps) {
	if d.App == nil {
		panic("kinds.Register: Deps.App is required")
	}
	c := d.Clock
	if c == nil {
		c = clock.Database{}
	}
	mailer := d.Mailer
	if mailer == nil {
		mailer = mail.NewSink(d.App)
	}
	weekly := &mail.WeeklyReportHandler{App: d.App, Mailer: mailer, From: d.MailFrom, Clock: c}
	sweep := &billing.SweepHandler{App: d.App, System: d.System, Service: billing.NewService(c)}
	award := &points.Handler{App: d.App, Service: points.NewService(c)}

	e.Register(EmailWeeklyReport, weekly.Handle, Options[EmailWeeklyReport])
	e.Register(SubscriptionSweep, sweep.Handle, Options[SubscriptionSweep])
	e.Register(PointsAward, award.Handle, Options[PointsAward])
	// Sensitive kinds work across the staff's tables on the system pool.
	if sys, ok := d.System.(database.Pool); ok {
		disable := &approval.DisableHandler{System: sys, Clock: c}
		e.Register(DisableAccess, disable.Handle, Options[DisableAccess])
	}
	if d.Payments != nil {
		e.Register(PaymentCharge, d.Payments.HandleCharge, Options[PaymentCharge])
		e.Register(PaymentReconcile, d.Payments.HandleReconcile, Options[PaymentReconcile])
	}
	if d.Jobs != nil {
		wh := &webhook.Deliverer{App: d.App, Jobs: d.Jobs, Clock: c, Client: d.WebhookGuard.Client(), OnOutcome: d.WebhookOutcome,
			TenantLimit: d.WebhookTenantLimit, Breaker: d.WebhookBreaker, Sealer: d.WebhookSealer, Mailer: mailer}
		e.Register(WebhookDeliver, wh.Handle, Options[WebhookDeliver])
		if d.Webhooks != nil {
			d.Webhooks.Register(WebhookDeliver, wh.Handle, Options[WebhookDeliver])
		}
	}
}
