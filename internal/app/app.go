package app

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/activity"
	"github.com/jejakhq/jejak/internal/alert"
	"github.com/jejakhq/jejak/internal/anchor"
	"github.com/jejakhq/jejak/internal/approval"
	"github.com/jejakhq/jejak/internal/audit"
	"github.com/jejakhq/jejak/internal/chaos"
	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/console"
	"github.com/jejakhq/jejak/internal/database"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/incident"
	"github.com/jejakhq/jejak/internal/job"
	"github.com/jejakhq/jejak/internal/kinds"
	"github.com/jejakhq/jejak/internal/mail"
	"github.com/jejakhq/jejak/internal/member"
	"github.com/jejakhq/jejak/internal/metrics"
	"github.com/jejakhq/jejak/internal/outboxconsole"
	"github.com/jejakhq/jejak/internal/payment"
	"github.com/jejakhq/jejak/internal/pgcluster"
	"github.com/jejakhq/jejak/internal/signin"
	"github.com/jejakhq/jejak/internal/support"
	"github.com/jejakhq/jejak/internal/tenant"
	"github.com/jejakhq/jejak/internal/tracing"
	"github.com/jejakhq/jejak/internal/user"
	"github.com/jejakhq/jejak/internal/web"
	"github.com/jejakhq/jejak/internal/webhook"
)

// Env is an opened, migrated database with Jejak's two pools.
type Env struct {
	URL     string
	App     *pgxpool.Pool // tenant-facing (jejak_app)
	System  *pgxpool.Pool // cross-tenant (jejak_system)
	cluster *pgcluster.Cluster
	log     *slog.Logger
}

// Open starts the embedded cluster when cfg has no DatabaseURL, applies
// migrations and opens the pools.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Env, error) {
	env := &Env{URL: cfg.DatabaseURL, log: log}
	if env.URL == "" {
		dir := filepath.Join(cfg.DataDir, "pg")
		log.Info("starting embedded PostgreSQL", "dir", dir)
		c, err := pgcluster.Start(ctx, dir, "jejak")
		if err != nil {
			return nil, fmt.Errorf("embedded database: %w", err)
		}
		env.cluster, env.URL = c, c.URL()
		log.Info("embedded PostgreSQL ready", "url", c.URL())
	}
	if err := database.Migrate(ctx, env.URL); err != nil {
		env.Close()
		return nil, err
	}
	// Each pool logs in as its own role: derived from DATABASE_URL (the
	// login roles are created on first start), or given explicitly.
	if cfg.DBConns == 0 {
		cfg.DBConns = 20
	}
	var err error
	if cfg.AppDatabaseURL != "" {
		env.App, err = database.OpenExplicit(ctx, cfg.AppDatabaseURL, database.AppRole, int32(cfg.DBConns))
	} else {
		env.App, err = database.Open(ctx, env.URL, int32(cfg.DBConns))
	}
	if err != nil {
		env.Close()
		return nil, fmt.Errorf("tenant pool: %w", err)
	}
	if cfg.SystemDatabaseURL != "" {
		env.System, err = database.OpenExplicit(ctx, cfg.SystemDatabaseURL, database.SystemRole, int32(cfg.DBConns))
	} else {
		env.System, err = database.OpenSystem(ctx, env.URL, int32(cfg.DBConns))
	}
	if err != nil {
		env.Close()
		return nil, fmt.Errorf("system pool: %w", err)
	}
	return env, nil
}

// Close closes the pools and stops the embedded cluster if Open started it.
func (e *Env) Close() {
	if e.App != nil {
		e.App.Close()
	}
	if e.System != nil {
		e.System.Close()
	}
	if e.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.cluster.Stop(ctx); err != nil {
			e.log.Error("stop embedded PostgreSQL", "error", err.Error())
		} else {
			e.log.Info("embedded PostgreSQL stopped")
		}
	}
}

// Serve runs the dashboard (unless workers-only) and the worker pool until
// ctx ends, then shuts down: HTTP first, then the workers, then the pools.
func Serve(ctx context.Context, cfg Config, log *slog.Logger, out io.Writer) error {
	env, err := Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer env.Close()
	if cfg.Demo {
		if err := demo.Seed(ctx, env.System); err != nil {
			return err
		}
		if err := demo.SeedHistory(ctx, env.System, nil); err != nil {
			return err
		}
		printDemoAccounts(out)
	}
	clk := clock.Database{}
	if cfg.Demo {
		hooks, err := startDemoHooks(ctx, env, log, out)
		if err != nil {
			return err
		}
		defer hooks.Close()
		// The receiver is on loopback, which the SSRF guard refuses.
		cfg.WebhookAllow = append(cfg.WebhookAllow, netip.MustParsePrefix("127.0.0.1/32"))
	}
	stopTracing, err := tracing.Setup(ctx, cfg.OTelEndpoint, "jejak", Version)
	if err != nil {
		return err
	}
	defer func() { _ = stopTracing(context.Background()) }()
	reg := NewMetrics(env)
	engine, ext, err := startEngine(ctx, cfg, env, clk, log, reg)
	if err != nil {
		return err
	}
	defer ext.stop()
	// Shutdown order: HTTP first (below), then the workers finish in-flight
	// jobs within a deadline and release the rest, then the pools close.
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := engine.Stop(stopCtx); err != nil {
			log.Error("stop workers", "error", err.Error())
		}
	}()
	ob, err := startOutbox(ctx, cfg, env, engine, clk, log, reg.OutboxPublished)
	if err != nil {
		return err
	}
	// Runs before the workers stop (defers unwind in reverse): the relay
	// settles its batch in flight, then NATS closes.
	defer ob.Close()
	deps := NewDeps(env.App, env.System, engine, clk, log)
	WithPayments(&deps, ext.payments)
	deps.Schedules = ext.scheduler
	deps.SecureCookies = cfg.SecureCookies
	anchors, err := anchor.Open(cfg.AnchorDirectory())
	if err != nil {
		return err
	}
	deps.Anchors = anchor.NewService(anchors, env.System)
	go runAnchors(ctx, anchors, env.System, engine, cfg.AnchorInterval, log)
	deps.TrustedProxies = cfg.TrustedProxies
	// Invitations go out through the same mailer as the weekly reports.
	mailer, err := newMailer(cfg, env)
	if err != nil {
		return err
	}
	deps.Members = member.NewService(env.App, env.System, clk, mailer, deps.Tenants)
	deps.Metrics, deps.MetricsToken = reg, cfg.MetricsToken
	deps.Alerts.SecretFromEnv(cfg.AlertWebhookSecret != "")
	handler := web.New(deps)
	if cfg.Demo {
		if err := demo.SeedSensitive(ctx, demo.SensitiveDeps{System: env.System, Approvals: deps.Approvals, Payments: ext.payments}); err != nil {
			log.Warn("demo approvals and payments", "error", err.Error())
		}
		gen := &demo.Activity{App: env.App, System: env.System, Tenants: deps.Tenants, Jobs: engine, Log: log}
		// A burst first, so every page has something to show at once.
		for i := 0; i < 40; i++ {
			if err := gen.Step(ctx); err != nil {
				log.Warn("demo activity", "error", err.Error())
			}
		}
		go gen.Run(ctx, 4*time.Second)
	}

	if cfg.WorkersOnly {
		<-ctx.Done()
		return nil
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	srv := web.NewHTTPServer(handler, web.DefaultTimeouts)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("Jejak is listening", "url", "http://"+ln.Addr().String())
	fmt.Fprintf(out, "\nJejak dashboard: http://%s/\n\n", ln.Addr().String())

	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http shutdown: %w", err)
	}
	return nil
}

// startEngine builds the job engine with every kind registered and, unless
// this replica serves only, starts its workers.
func startEngine(ctx context.Context, cfg Config, env *Env, clk clock.Clock, log *slog.Logger, reg *metrics.Registry) (*job.Engine, *extras, error) {
	mailer, err := newMailer(cfg, env)
	if err != nil {
		return nil, nil, err
	}
	// The tally counts this replica's attempts for the worker-outlier
	// alert and passes every event on to the metrics.
	tally := alert.NewWorkerTally(reg)
	engine, err := job.New(job.Config{Pool: env.System, Clock: clk, Workers: cfg.Workers, Logger: log, Observer: tally,
		LeaseDuration: cfg.Lease, HeartbeatInterval: cfg.Heartbeat, ScheduledPrune: true})
	if err != nil {
		return nil, nil, err
	}
	// Payments, the scheduler and the failure-rate guard are wired before
	// Start, so no claimed job meets an unregistered kind.
	ext, err := wireExtras(cfg, env, engine, clk, log)
	if err != nil {
		return nil, nil, err
	}
	kinds.Register(engine, kinds.Deps{App: env.App, System: env.System, Clock: clk, Mailer: mailer,
		Jobs: engine, WebhookGuard: webhook.Guard{Allow: cfg.WebhookAllow}, Payments: ext.payments,
		WebhookOutcome: reg.WebhookDelivered})
	if cfg.ChaosKind {
		chaos.Register(engine, env.App)
	}
	if cfg.Workers > 0 {
		if err := engine.Start(ctx); err != nil {
			ext.stop()
			return nil, nil, fmt.Errorf("start workers: %w", err)
		}
		log.Info("workers started", "workers", cfg.Workers, "worker_id", engine.WorkerID())
		go tally.Run(ctx, env.System, clk, engine.WorkerID(), 30*time.Second)
		// Alert rules run on whichever replica holds the maintenance lock;
		// their transitions go to the staff webhook through the outbox.
		notifier, err := staffWebhook(ctx, cfg, env, clk, log)
		if err != nil {
			ext.stop()
			return nil, nil, err
		}
		evaluator := alert.New(alert.Config{Pool: env.System, Clock: clk, Logger: log,
			Rules:   alert.DefaultRules(alert.Sources{OutboxLag: outboxLag(env)}),
			Observe: reg.AlertTransition, Firing: reg.AlertFiring, OnTransition: notifier.Hook()})
		go evaluator.Run(ctx, 15*time.Second, engine.IsLeader)
	}
	return engine, ext, nil
}

// newMailer is the configured mailer: SMTP when JEJAK_SMTP_URL is set, else
// the dev sink; in the demo, mail to bounce.test fails like an SMTP outage,
// so some jobs retry with backoff and end as dead letters.
func newMailer(cfg Config, env *Env) (mail.Mailer, error) {
	var mailer mail.Mailer = mail.NewSink(env.App)
	if cfg.SMTPURL != "" {
		var err error
		if mailer, err = mail.NewSMTP(cfg.SMTPURL); err != nil {
			return nil, fmt.Errorf("JEJAK_SMTP_URL: %w", err)
		}
	}
	if cfg.Demo {
		mailer = demo.BounceMailer{Next: mailer}
	}
	return mailer, nil
}

// NewDeps wires the dashboard's dependencies over the two pools. serve
// and the tests both build the handler from it (tests adjust a field or
// two), so they exercise the same wiring.
func NewDeps(appPool, systemPool *pgxpool.Pool, engine *job.Engine, clk clock.Clock, log *slog.Logger) web.Deps {
	tenants := tenant.NewService(appPool, systemPool, clk)
	trail := audit.NewService(appPool, systemPool)
	users := user.NewService(user.NewStore(appPool))
	var observer job.Observer // discarded dead letters count with the engine's jobs
	if engine != nil {
		observer = engine.Observer()
	}
	cons := console.New(console.Config{App: appPool, System: systemPool, Clock: clk, Kinds: engine,
		Tenants: tenants, Audit: trail, Observer: observer})
	return web.Deps{
		DB:       appPool,
		Sessions: signin.NewSessionStore(appPool, 30*time.Minute),
		Users:    users,
		Tenants:  tenants,
		Audit:    trail,
		Console:  cons,
		Clock:    clk,
		Logger:   log,
		Webhooks: webhook.NewService(appPool, clk, engine),
		Outbox:   outboxconsole.New(systemPool, clk),
		SignIn:   signin.NewService(appPool, users, clk, signin.DefaultLimits),
		CSRF:     signin.NewCSRFSigner(systemPool),
		Activity: activity.NewService(appPool),
		// Invitations go to the dev mail sink unless serve sets its mailer.
		Members: member.NewService(appPool, systemPool, clk, mail.NewSink(appPool), tenants),
		// Staff tenant pages and two-person approvals (system pool).
		Approvals: approval.NewService(systemPool, engine, clk).WithReplayer(cons),
		Support:   support.NewService(systemPool, clk),
		// No provider until WithPayments: billing shows Jejak's own records.
		Payments: payment.NewService(appPool, systemPool, nil, engine, clk),
		// The incident page and alerts (system pool).
		Incidents: incident.NewService(systemPool),
		Alerts:    alert.NewService(systemPool, nil),
		Controls:  engine,
	}
}

// WithPayments adds payments to the dashboard: the billing page, staff's
// on-demand reconciliation, and invoices with charges on plan upgrades.
func WithPayments(d *web.Deps, p *payment.Service) {
	d.Payments = p
	d.Tenants.SetPlanHook(p.OnPlanChange)
}

// Seed writes the demo data and, when scale asks for it, large-data mode's
// millions of audit events and jobs.
func Seed(ctx context.Context, cfg Config, log *slog.Logger, out io.Writer, scale demo.ScaleOptions) error {
	env, err := Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer env.Close()
	if err := demo.Seed(ctx, env.System); err != nil {
		return err
	}
	if err := demo.SeedHistory(ctx, env.System, nil); err != nil {
		return err
	}
	printDemoAccounts(out)
	if scale.AuditEvents > 0 || scale.Jobs > 0 {
		scale.Out = out
		start := time.Now()
		if err := demo.SeedScale(ctx, env.System, env.URL, scale); err != nil {
			return err
		}
		fmt.Fprintf(out, "large-data seed done in %s\n", time.Since(start).Round(time.Second))
	}
	return nil
}

// runAnchors writes signed checkpoints of the audit heads that moved, every
// interval, while this replica leads job maintenance (one writer at a time).
func runAnchors(ctx context.Context, s *anchor.Store, system *pgxpool.Pool, engine *job.Engine, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !engine.IsLeader() {
			continue
		}
		if n, err := s.Write(ctx, system, false); err != nil {
			log.Error("write audit anchors", "error", err.Error())
		} else if n > 0 {
			log.Info("audit anchors written", "tenants", n, "dir", s.Dir())
		}
	}
}

// AuditAnchor writes a signed checkpoint of every tenant's audit head now
// (on demand; the leader also does it every JEJAK_ANCHOR_INTERVAL).
func AuditAnchor(ctx context.Context, cfg Config, log *slog.Logger, out io.Writer) error {
	env, err := Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer env.Close()
	s, err := anchor.Open(cfg.AnchorDirectory())
	if err != nil {
		return err
	}
	n, err := s.Write(ctx, env.System, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "anchored %d tenant(s) in %s (public key %x)\n", n, filepath.Join(s.Dir(), anchor.AnchorsFile), s.Public())
	return nil
}

// AuditVerifyExport checks a JSON Lines export against a downloaded
// checkpoint file, offline (no database). pubHex is the operator's
// published anchor key; "" trusts the key inside the checkpoint file.
func AuditVerifyExport(out io.Writer, exportPath, checkpointPath, pubHex string) error {
	raw, err := os.ReadFile(checkpointPath)
	if err != nil {
		return err
	}
	var cp struct {
		anchor.Checkpoint
		PublicKey string `json:"public_key"`
	}
	if err := json.Unmarshal(raw, &cp); err != nil {
		return fmt.Errorf("checkpoint %s: %w", checkpointPath, err)
	}
	if pubHex == "" {
		pubHex = cp.PublicKey
	}
	pub, err := hex.DecodeString(pubHex)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("public key %q is not a hex Ed25519 key", pubHex)
	}
	f, err := os.Open(exportPath)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := anchor.VerifyExport(f, cp.Checkpoint, pub); err != nil {
		return err
	}
	fmt.Fprintf(out, "ok: export verified through the checkpoint #%d of %s (tenant %d)\n", cp.Seq, cp.At.Format(time.RFC3339), cp.TenantID)
	return nil
}

// AuditVerify checks the hash chain of one tenant (slug) or of all tenants,
// prints one line per tenant and fails when any chain is broken. With an
// anchor directory it also compares every chain with its last signed
// checkpoint (anchor.Check).
func AuditVerify(ctx context.Context, cfg Config, log *slog.Logger, out io.Writer, slug string, anchorDir ...string) error {
	env, err := Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer env.Close()
	tenants := tenant.NewService(env.App, env.System, nil)
	trail := audit.NewService(env.App, env.System)
	names, err := tenants.Names(ctx)
	if err != nil {
		return err
	}
	var results []audit.VerifyResult
	if slug != "" {
		t, ok := names.BySlug(slug)
		if !ok {
			return fmt.Errorf("tenant %q not found", slug)
		}
		r, err := trail.VerifyTenant(ctx, t.ID)
		if err != nil {
			return err
		}
		results = append(results, r)
	} else if results, err = trail.VerifyAll(ctx); err != nil {
		return err
	}
	broken := 0
	// Heads and tenants must agree even without anchors (a tenant with
	// events but no head would otherwise verify as an empty chain); with
	// an anchor directory every chain is also compared with its last
	// signed checkpoint.
	latest := map[int64]anchor.Checkpoint{}
	if len(anchorDir) > 0 && anchorDir[0] != "" {
		pub, err := anchor.LoadPublic(anchorDir[0])
		if err != nil {
			return err
		}
		if latest, err = anchor.Latest(anchorDir[0], pub); err != nil {
			return fmt.Errorf("anchors: %w", err)
		}
		fmt.Fprintf(out, "checking %d anchored tenant(s) against %s\n", len(latest), anchorDir[0])
	}
	problems, err := anchor.Check(ctx, env.System, latest)
	if err != nil {
		return err
	}
	for _, p := range problems {
		broken++
		name := names.Slug(p.TenantID)
		if name == "" {
			name = fmt.Sprintf("tenant %d", p.TenantID)
		}
		fmt.Fprintf(out, "%-24s ANCHOR  %s\n", name, p.Reason)
	}
	for _, r := range results {
		if r.OK {
			fmt.Fprintf(out, "%-24s ok      verified through #%d (head %x)\n", names.Slug(r.TenantID), r.CheckedThrough, r.HeadHash)
			continue
		}
		broken++
		fmt.Fprintf(out, "%-24s BROKEN  first bad event #%d: %s\n", names.Slug(r.TenantID), r.FirstBadSeq, r.Reason)
	}
	if broken > 0 {
		return fmt.Errorf("%d problem(s) in %d audit chains", broken, len(results))
	}
	return nil
}

// Migrate applies pending migrations and exits.
func Migrate(ctx context.Context, cfg Config, log *slog.Logger) error {
	env, err := Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	env.Close()
	log.Info("migrations applied")
	return nil
}

func printDemoAccounts(out io.Writer) {
	var b strings.Builder
	b.WriteString("\nDemo accounts (demo only), password \"" + demo.Password + "\":\n")
	for _, a := range demo.Accounts {
		role := a.Role + " of " + a.Tenant
		if a.Staff != "" {
			role = "staff (" + a.Staff + ")"
		}
		fmt.Fprintf(&b, "  %-20s %s\n", a.Email, role)
	}
	fmt.Fprint(out, b.String())
}
