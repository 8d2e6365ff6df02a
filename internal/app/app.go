package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
	"github.com/jejakhq/jejak/internal/witness"
)

// Env is an opened, migrated database with Jejak's two pools.
type Env struct {
	URL    string
	App    *pgxpool.Pool // tenant-facing (jejak_app)
	System *pgxpool.Pool // cross-tenant (jejak_system)
	// Seal is the audit sealer's own (jejak_system), opened by Serve
	// (openSealPool); nil for the one-shot commands, which seal on System.
	Seal    *pgxpool.Pool
	cluster *pgcluster.Cluster
	log     *slog.Logger
	// WebhookSealer seals webhook signing secrets at rest, with the key
	// in JEJAK_WEBHOOK_KEY_FILE.
	WebhookSealer *webhook.Sealer
}

// Open starts the embedded cluster when cfg has no DatabaseURL, applies
// migrations and opens the pools, trying an external database that cannot
// be reached or does not accept sessions yet again for up to StartupWait.
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
	// A replica may start while its database restarts (or before it is
	// up): it waits for it, as its running parts do, rather than exit.
	start := time.Now()
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := env.connect(ctx, cfg)
		if err == nil {
			return env, nil
		}
		if env.cluster != nil || !database.Unavailable(err) || time.Since(start) > StartupWait {
			env.Close()
			return nil, err
		}
		log.Warn("database unavailable; trying again", "error", err.Error(), "in", wait.String())
		if err := clock.Sleep(ctx, wait); err != nil {
			env.Close()
			return nil, err
		}
	}
}

// StartupWait is how long Open keeps trying a database that cannot be
// reached or is not accepting sessions yet.
const StartupWait = time.Minute

// connect applies the migrations and opens the two pools; on an error it
// leaves no pool open.
func (e *Env) connect(ctx context.Context, cfg Config) (err error) {
	defer func() {
		if err != nil {
			e.closePools()
		}
	}()
	if err := database.Migrate(ctx, e.URL); err != nil {
		return err
	}
	// Each pool logs in as its own role: derived from DATABASE_URL (the
	// login roles are created on first start), or given explicitly.
	if cfg.DBConns == 0 {
		cfg.DBConns = DefaultDBConns
	}
	if e.App, err = e.openPool(ctx, cfg, database.AppRole, cfg.DBConns); err != nil {
		return fmt.Errorf("tenant pool: %w", err)
	}
	if e.System, err = e.openPool(ctx, cfg, database.SystemRole, cfg.DBConns); err != nil {
		return fmt.Errorf("system pool: %w", err)
	}
	return nil
}

// openPool opens a pool of conns connections as role (database.AppRole or
// database.SystemRole): with the operator's URL for that role when given,
// else logging in as the role's login derived from DATABASE_URL.
func (e *Env) openPool(ctx context.Context, cfg Config, role string, conns int) (*pgxpool.Pool, error) {
	explicit, derived := cfg.AppDatabaseURL, database.Open
	if role == database.SystemRole {
		explicit, derived = cfg.SystemDatabaseURL, database.OpenSystem
	}
	if explicit != "" {
		return database.OpenExplicit(ctx, explicit, role, int32(conns))
	}
	return derived(ctx, e.URL, int32(conns))
}

// closePools closes the pools that are open.
func (e *Env) closePools() {
	for _, p := range []**pgxpool.Pool{&e.App, &e.System, &e.Seal} {
		if *p != nil {
			(*p).Close()
			*p = nil
		}
	}
}

// sealWebhookSecrets loads (or creates) the key that seals webhook signing
// secrets and seals the ones still stored readable. Only serve needs it
// (the other commands never read or write a secret).
func (e *Env) sealWebhookSecrets(ctx context.Context, cfg Config) error {
	s, err := webhook.LoadSealer(cfg.WebhookKeyPath())
	if err != nil {
		return err
	}
	e.WebhookSealer = s
	n, err := webhook.SealStored(ctx, e.System, s)
	if err != nil {
		return err
	}
	if n > 0 {
		e.log.Info("sealed webhook signing secrets", "endpoints", n)
	}
	return nil
}

// Close closes the pools and stops the embedded cluster if Open started it.
func (e *Env) Close() {
	e.closePools()
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

// serveGCPercent is the garbage collector's target when GOGC is unset:
// pages allocate much that dies with the request over a small live heap,
// so at Go's default (100) collection took about a seventh of the web
// process's CPU on the trail under load. The heap may grow to five times
// the live heap instead of twice (GOGC set in the environment wins).
const serveGCPercent = 400

// Serve runs the dashboard (unless workers-only) and the worker pool until
// ctx ends, then shuts down: HTTP first, then the workers, then the pools.
func Serve(ctx context.Context, cfg Config, log *slog.Logger, out io.Writer) error {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(serveGCPercent)
	}
	if cfg.PprofAddr != "" {
		prof, err := startPprof(cfg.PprofAddr, log)
		if err != nil {
			return err
		}
		defer prof.stop()
	}
	env, err := Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer env.Close()
	if err := env.sealWebhookSecrets(ctx, cfg); err != nil {
		return err
	}
	if err := env.openSealPool(ctx, cfg); err != nil {
		return err
	}
	clk := clock.Database{}
	if cfg.Demo {
		if err := seedDemo(ctx, env, out); err != nil {
			return err
		}
		hooks, err := startDemoHooks(ctx, env, log, out)
		if err != nil {
			return err
		}
		defer hooks.Close()
		// The receiver is on loopback, which the SSRF guard refuses: open
		// its address and port only, not the host's other services.
		cfg.WebhookAllowAddrs = append(cfg.WebhookAllowAddrs, hooks.AddrPort())
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
	defer stopEngine(engine, log)
	ob, err := startOutbox(ctx, cfg, env, engine, clk, log, reg.OutboxPublished)
	if err != nil {
		return err
	}
	reg.WatchFanout(func(ctx context.Context) (int64, error) { return webhook.FanoutPending(ctx, ob.bus.Stream) })
	// Runs before the workers stop (defers unwind in reverse): the relay
	// settles its batch in flight, then NATS closes.
	defer ob.Close()
	deps, err := serveDeps(ctx, cfg, env, engine, ext, clk, log, reg)
	if err != nil {
		return err
	}
	// Failed sign-ins are recorded after their answer: let those finish
	// before the pools close (after the HTTP server has stopped).
	defer deps.SignIn.Drain()
	handler := web.New(deps)
	if cfg.Demo {
		startDemoActivity(ctx, env, deps, engine, ext, log)
	}
	if cfg.WorkersOnly {
		<-ctx.Done()
		return nil
	}
	return serveHTTP(ctx, cfg.Addr, handler, log, out)
}

// seedDemo writes the demo data and its history and prints the accounts.
func seedDemo(ctx context.Context, env *Env, out io.Writer) error {
	if err := demo.Seed(ctx, env.System); err != nil {
		return err
	}
	if err := demo.SeedHistory(ctx, env.System, nil); err != nil {
		return err
	}
	printDemoAccounts(out)
	return nil
}

// stopEngine lets the workers finish in-flight jobs within a deadline and
// releases the rest.
func stopEngine(engine *job.Engine, log *slog.Logger) {
	stopCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := engine.Stop(stopCtx); err != nil {
		log.Error("stop workers", "error", err.Error())
	}
}

// serveDeps wires the dashboard of a serving replica: NewDeps plus the
// payments, schedules, the audit sealer, the mailer and the metrics.
func serveDeps(ctx context.Context, cfg Config, env *Env, engine *job.Engine, ext *extras, clk clock.Clock, log *slog.Logger, reg *metrics.Registry) (web.Deps, error) {
	deps := NewDeps(env.App, env.System, engine, clk, log)
	deps.Webhooks = webhook.NewService(env.App, clk, webhookJobs(engine)).LimitEndpoints(cfg.WebhookMaxEndpoints).
		SealWith(env.WebhookSealer)
	WithPayments(&deps, ext.payments)
	deps.Schedules = ext.scheduler
	deps.SecureCookies = cfg.SecureCookies
	// A replica with workers seals its share of the tenants first, the
	// same share its workers claim; one without seals every tenant.
	var slot func() (int, int)
	if cfg.Workers > 0 {
		slot = engine.Slot
	}
	sealer, err := newSealer(ctx, cfg, env, log, reg, slot)
	if err != nil {
		return deps, err
	}
	deps.Audit.UseVerifierKey(sealer.VerifierKey())
	// Every serving replica seals, with workers or not (a deployment of
	// web replicas alone records sign-ins and owner actions too); a
	// tenant's tree row lock (SKIP LOCKED) keeps one sealer per tenant at
	// a time.
	go sealer.Run(ctx, sealPoll)
	deps.TrustedProxies = cfg.TrustedProxies
	// Invitations go out through the same mailer as the weekly reports.
	mailer, err := newMailer(cfg, env)
	if err != nil {
		return deps, err
	}
	deps.Members = member.NewService(env.App, env.System, clk, mailer, deps.Tenants)
	deps.Metrics, deps.MetricsToken = reg, cfg.MetricsToken
	deps.Alerts.SecretFromEnv(cfg.AlertWebhookSecret != "").OpenSecretsWith(env.WebhookSealer)
	return deps, nil
}

// startDemoActivity seeds the demo's approvals and payments, runs a burst
// of activity so every page has something to show at once, and keeps
// generating activity until ctx ends.
func startDemoActivity(ctx context.Context, env *Env, deps web.Deps, engine *job.Engine, ext *extras, log *slog.Logger) {
	if err := demo.SeedSensitive(ctx, demo.SensitiveDeps{System: env.System, Approvals: deps.Approvals, Payments: ext.payments}); err != nil {
		log.Warn("demo approvals and payments", "error", err.Error())
	}
	gen := &demo.Activity{App: env.App, System: env.System, Tenants: deps.Tenants, Jobs: engine, Log: log}
	for i := 0; i < 40; i++ {
		if err := gen.Step(ctx); err != nil {
			log.Warn("demo activity", "error", err.Error())
		}
	}
	go gen.Run(ctx, 4*time.Second)
}

// serveHTTP serves handler on addr until ctx ends, then shuts the server
// down gracefully.
func serveHTTP(ctx context.Context, addr string, handler http.Handler, log *slog.Logger, out io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
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
	wh, err := newWebhookEngine(cfg, env, clk, log, tally, engine.WorkerID())
	if err != nil {
		ext.stop()
		return nil, nil, err
	}
	kinds.Register(engine, kinds.Deps{App: env.App, System: env.System, Clock: clk, Mailer: mailer,
		Jobs: webhookJobs(engine), WebhookGuard: webhook.Guard{Allow: cfg.WebhookAllow, AllowAddrs: cfg.WebhookAllowAddrs}, Payments: ext.payments,
		WebhookOutcome: reg.WebhookDelivered, Webhooks: wh, WebhookTenantLimit: cfg.WebhookTenantConcurrency,
		WebhookBreaker: cfg.WebhookBreaker, WebhookSealer: env.WebhookSealer})
	// Deliveries held behind open breakers go back to the queue (or fail
	// with their endpoint) on the maintenance leader's passes.
	held := webhook.HeldSweep{System: env.System, Jobs: webhookJobs(engine), Clock: clk}
	engine.OnMaintenance(func(ctx context.Context) error {
		_, err := held.Run(ctx)
		return err
	})
	if cfg.ChaosKind {
		chaos.Register(engine, env.App)
	}
	if cfg.Workers > 0 {
		if err := engine.Start(ctx); err != nil {
			ext.stop()
			return nil, nil, fmt.Errorf("start workers: %w", err)
		}
		if err := startWebhookEngine(ctx, wh, ext, log); err != nil {
			ext.stop()
			return nil, nil, err
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
		DB:          appPool,
		Sessions:    signin.NewSessionStore(appPool, systemPool, 30*time.Minute),
		Users:       users,
		Tenants:     tenants,
		Audit:       trail,
		AuditTokens: audit.NewTokens(appPool, clk),
		Console:     cons,
		Clock:       clk,
		Logger:      log,
		Webhooks:    webhook.NewService(appPool, clk, engine),
		Outbox:      outboxconsole.New(systemPool, clk),
		SignIn: signin.NewService(signin.Config{DB: appPool, Keys: systemPool, Users: users, Clock: clk,
			Limits: signin.DefaultLimits, Failures: tenants, Logger: log}),
		CSRF: signin.NewCSRFSigner(systemPool),
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
	if err := seedDemo(ctx, env, out); err != nil {
		return err
	}
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

// replicaOwnSessions are the sessions a replica opens beside its pools:
// the heartbeats of its two engines (jobs, webhook deliveries), the
// notification listeners of those engines and of the outbox relay, the job
// engine's maintenance election and the outbox relay's lease.
const replicaOwnSessions = 7

// ReplicaSessions is the most sessions one serving replica opens with
// pools of conns (JEJAK_DB_CONNS): what to keep under PostgreSQL's
// max_connections over all replicas.
func ReplicaSessions(conns int) int {
	return 2*conns + sealConns + replicaOwnSessions
}

// sealConns is the size of the sealer's pool: a connection for each
// tenant it seals at once and one for its indexer.
const sealConns = audit.DefaultSealParallel + 1

// openSealPool opens the sealer's pool (sealConns). A seal batch is a few
// round trips under the tenant's tree lock; taking its connection from the
// system pool, it queued behind the replica's claims, completions and
// relay, and with pools of 4 the seal delay's p99 passed a second at four
// replicas. Its own pool does not shrink with JEJAK_DB_CONNS: sealing
// fewer tenants at once lengthened the delay again.
func (e *Env) openSealPool(ctx context.Context, cfg Config) error {
	var err error
	if e.Seal, err = e.openPool(ctx, cfg, database.SystemRole, sealConns); err != nil {
		return fmt.Errorf("audit sealer pool: %w", err)
	}
	return nil
}

// sealPoll is how often a sealer starts a pass over the tenants with
// unsealed events (a pass that takes longer is followed at once).
const sealPoll = 100 * time.Millisecond

// newSealer opens the anchor directory (its key signs the checkpoints,
// its anchors file keeps a copy of each) and returns the audit sealer,
// refusing a key other than the one the database's logs are signed with.
func newSealer(ctx context.Context, cfg Config, env *Env, log *slog.Logger, reg *metrics.Registry, slot func() (members, rank int)) (*audit.Sealer, error) {
	anchors, err := anchor.Open(cfg.AnchorDirectory())
	if err != nil {
		return nil, err
	}
	signer, err := anchors.Signer()
	if err != nil {
		return nil, err
	}
	pool := cmp.Or(env.Seal, env.System)
	opts := audit.SealerOptions{Signer: signer, Sink: anchors, Log: log, Parallel: audit.DefaultSealParallel, Slot: slot}
	if reg != nil {
		opts.OnSealed = reg.ObserveSealDelays
	}
	sealer := audit.NewSealer(pool, opts)
	if err := sealer.CheckKey(ctx); err != nil {
		return nil, fmt.Errorf("%w; every replica signs with one key: give this one the %s of a replica that signs this database's logs (or JEJAK_ANCHOR_DIR pointing at its directory) instead of %s", err, anchor.KeyFile, filepath.Join(cfg.AnchorDirectory(), anchor.KeyFile))
	}
	return sealer, nil
}

// AuditAnchor seals every waiting audit event and signs a checkpoint of
// every grown tree now, appending each to the anchor file (the sealer
// does it continuously while the server runs).
func AuditAnchor(ctx context.Context, cfg Config, log *slog.Logger, out io.Writer) error {
	env, err := Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer env.Close()
	sealer, err := newSealer(ctx, cfg, env, log, nil, nil)
	if err != nil {
		return err
	}
	if err := sealer.Drain(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "sealed and signed in %s (verifier key %s)\n", filepath.Join(cfg.AnchorDirectory(), anchor.AnchorsFile), sealer.VerifierKey())
	return nil
}

// AuditVerifyExport checks a JSON Lines export offline (no database)
// against the checkpoint in its trailer; vkey is the operator's published
// note verifier key (GET /audit/key).
func AuditVerifyExport(out io.Writer, exportPath, vkey string) error {
	f, err := os.Open(exportPath)
	if err != nil {
		return err
	}
	defer f.Close()
	sum, err := audit.VerifyExport(f, vkey)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "ok: %d events of tenant %d verified against the signed checkpoint of tree size %d\n", sum.Count, sum.TenantID, sum.TreeSize)
	return nil
}

// AuditVerifyProof checks a "Prove this event" bundle offline against the
// operator's note verifier key.
func AuditVerifyProof(out io.Writer, path, vkey string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	cp, err := audit.VerifyProofBundle(f, vkey)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "ok: the event is in %s, tree size %d, as the signed checkpoint says\n", cp.Origin, cp.Size)
	return nil
}

// AuditWitness witnesses one tenant's log once from outside (see package
// witness): it accepts the server's checkpoint only when it extends the
// last one accepted, and says what it saw either way.
func AuditWitness(ctx context.Context, out io.Writer, o witness.Options) error {
	res, err := witness.Run(ctx, o)
	if err != nil {
		if res.Evidence != "" {
			return fmt.Errorf("%w\nboth checkpoints are kept in %s", err, res.Evidence)
		}
		return err
	}
	switch {
	case res.First:
		fmt.Fprintf(out, "ok: %s: first checkpoint accepted, %d events, root %s\n", res.Origin, res.Size, res.Root)
	case res.Size == res.PrevSize:
		fmt.Fprintf(out, "ok: %s: unchanged at %d events\n", res.Origin, res.Size)
	default:
		fmt.Fprintf(out, "ok: %s: %d events extend the %d accepted before (consistency proof checked), root %s\n", res.Origin, res.Size, res.PrevSize, res.Root)
	}
	return nil
}

// AuditVerify checks the log of one tenant (slug) or of all tenants,
// prints one line per tenant and fails when any log is broken. With an
// anchor directory every log is also checked against every checkpoint
// anchored there.
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
	dir := cfg.AnchorDirectory()
	if len(anchorDir) > 0 && anchorDir[0] != "" {
		dir = anchorDir[0]
	}
	var points map[int64][]audit.AnchorPoint
	if pub, err := anchor.LoadPublic(dir); err == nil {
		vkey, err := audit.VerifierKeyOf(pub)
		if err != nil {
			return err
		}
		trail.UseVerifierKey(vkey)
		if points, err = anchor.Points(dir, pub); err != nil {
			return fmt.Errorf("anchors: %w", err)
		}
		fmt.Fprintf(out, "checking against %d anchored tenant(s) in %s (verifier key %s)\n", len(points), dir, vkey)
	} else if len(anchorDir) > 0 && anchorDir[0] != "" {
		return err
	}
	var results []audit.VerifyResult
	if slug != "" {
		t, ok := names.BySlug(slug)
		if !ok {
			return fmt.Errorf("tenant %q not found", slug)
		}
		r, err := trail.VerifyTenant(ctx, t.ID, points[t.ID])
		if err != nil {
			return err
		}
		results = append(results, r)
	} else if results, err = trail.VerifyAll(ctx, points); err != nil {
		return err
	}
	broken := 0
	for _, r := range results {
		if r.OK {
			fmt.Fprintf(out, "%-24s ok      verified through #%d (tree root %x)\n", names.Slug(r.TenantID), r.CheckedThrough, r.Root)
			continue
		}
		broken++
		fmt.Fprintf(out, "%-24s BROKEN  first bad event #%d: %s\n", names.Slug(r.TenantID), r.FirstBadSeq, r.Reason)
	}
	if broken > 0 {
		return fmt.Errorf("%d problem(s) in %d audit logs", broken, len(results))
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
