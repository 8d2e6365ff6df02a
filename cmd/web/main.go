// Command web is Jejak: the dashboard and the worker pool in one binary.
//
//	web [serve]           dashboard + workers (default)
//	web migrate           apply database migrations
//	web seed              write the demo data
//	web seed --audit-events N --jobs N   large-data mode
//	web audit verify [--tenant SLUG] [--anchors DIR]   check audit logs (and their anchored checkpoints)
//	web audit anchor                      seal every waiting audit event and sign checkpoints now
//	web audit verify-export --key VKEY EXPORT.jsonl   offline check of an export
//	web audit verify-proof --key VKEY PROOF.json      offline check of a "Prove this event" bundle
//	web audit witness --url BASE --slug SLUG --state DIR   witness a tenant's log from outside (token in JEJAK_AUDIT_TOKEN)
//	web outbox status                     outbox counts, lag, failed messages
//	web outbox retry-failed [--tenant SLUG] --reason TEXT
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/jejakhq/jejak/internal/app"
	"github.com/jejakhq/jejak/internal/demo"
	"github.com/jejakhq/jejak/internal/tracing"
	"github.com/jejakhq/jejak/internal/witness"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "web:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	cfg, err := app.FromEnv(getenv)
	if err != nil {
		return err
	}
	cmd, args, err := splitCommand(args)
	if err != nil {
		return err
	}
	var o options
	fs := flag.NewFlagSet("web "+cmd, flag.ContinueOnError)
	fs.SetOutput(out)
	if err := defineFlags(fs, cmd, &cfg, &o); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cmd == "audit verify-export" || cmd == "audit verify-proof" {
		if fs.NArg() != 1 || o.vkey == "" {
			return fmt.Errorf("usage: web %s --key VKEY FILE", cmd)
		}
		if cmd == "audit verify-proof" {
			return app.AuditVerifyProof(out, fs.Arg(0), o.vkey)
		}
		return app.AuditVerifyExport(out, fs.Arg(0), o.vkey)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if cmd == "audit witness" {
		return runWitness(ctx, out, getenv, o)
	}
	if cfg.Workers < 0 {
		return fmt.Errorf("-workers must be ≥ 0")
	}
	return dispatch(ctx, cmd, cfg, out, o)
}

// options are the flags of the commands other than serve (serve's set
// fields of app.Config).
type options struct {
	reason                      string
	scale                       demo.ScaleOptions
	tenantSlug, anchorDir, vkey string
	wit                         witness.Options
	tokenFile                   string
}

// splitCommand takes the command off args: "serve" when the first argument
// is a flag or absent; the audit and outbox commands take a second word.
func splitCommand(args []string) (string, []string, error) {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	if cmd == "audit" {
		if len(args) == 0 || (args[0] != "verify" && args[0] != "anchor" && args[0] != "verify-export" && args[0] != "verify-proof" && args[0] != "witness") {
			return "", nil, fmt.Errorf("usage: web audit verify [--tenant SLUG] [--anchors DIR] | web audit anchor | web audit verify-export --key VKEY EXPORT.jsonl | web audit verify-proof --key VKEY PROOF.json | web audit witness --url BASE --slug SLUG --state DIR")
		}
		cmd, args = "audit "+args[0], args[1:]
	}
	if cmd == "outbox" {
		if len(args) == 0 || (args[0] != "status" && args[0] != "retry-failed") {
			return "", nil, fmt.Errorf("usage: web outbox status | web outbox retry-failed [--tenant SLUG] --reason TEXT")
		}
		cmd, args = "outbox "+args[0], args[1:]
	}
	return cmd, args, nil
}

// defineFlags declares cmd's flags on fs, bound to cfg and o.
func defineFlags(fs *flag.FlagSet, cmd string, cfg *app.Config, o *options) error {
	fs.StringVar(&cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "PostgreSQL URL (DATABASE_URL); empty = embedded cluster")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "embedded cluster directory (JEJAK_DATA_DIR)")
	switch cmd {
	case "serve":
		fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address (JEJAK_ADDR)")
		fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "worker goroutines, 0 = web only (JEJAK_WORKERS)")
		fs.BoolVar(&cfg.WorkersOnly, "workers-only", cfg.WorkersOnly, "run workers without the HTTP server")
		fs.BoolVar(&cfg.Demo, "demo", cfg.Demo, "seed demo data and generate demo activity (JEJAK_DEMO)")
	case "seed":
		fs.IntVar(&o.scale.AuditEvents, "audit-events", 0, "also generate this many audit events (large-data mode)")
		fs.IntVar(&o.scale.Jobs, "jobs", 0, "also generate this many jobs (large-data mode)")
		fs.IntVar(&o.scale.Tenants, "tenants", 20, "generated tenants for large-data mode, besides the demo ones")
	case "audit verify":
		fs.StringVar(&o.tenantSlug, "tenant", "", "verify only this tenant (slug)")
		fs.StringVar(&o.anchorDir, "anchors", "", "also compare every chain with its last signed checkpoint in this directory")
	case "audit anchor":
		fs.StringVar(&cfg.AnchorDir, "anchors", cfg.AnchorDir, "anchor directory (JEJAK_ANCHOR_DIR; default <data dir>/anchors)")
	case "audit verify-export", "audit verify-proof":
		fs.StringVar(&o.vkey, "key", "", "the operator's note verifier key, as GET /audit/key publishes it")
	case "audit witness":
		fs.StringVar(&o.wit.BaseURL, "url", "", "the dashboard's address, e.g. https://jejak.example.com")
		fs.StringVar(&o.wit.Slug, "slug", "", "the tenant whose log to witness")
		fs.StringVar(&o.wit.StateDir, "state", "", "the witness's directory: the pinned key and the last accepted checkpoint")
		fs.StringVar(&o.wit.Key, "key", "", "pin this verifier key instead of the one /audit/key publishes on the first run")
		fs.StringVar(&o.tokenFile, "token-file", "", "read the audit token from this file instead of JEJAK_AUDIT_TOKEN")
	case "outbox status":
	case "outbox retry-failed":
		fs.StringVar(&o.tenantSlug, "tenant", "", "retry only this tenant's failed messages (slug)")
		fs.StringVar(&o.reason, "reason", "", "why (required; recorded in each affected tenant's audit trail)")
	case "migrate":
	default:
		return fmt.Errorf("unknown command %q (want serve, migrate, seed, audit verify, audit anchor, audit verify-export, audit verify-proof, audit witness or outbox)", cmd)
	}
	return nil
}

// runWitness runs `web audit witness` with the token from
// JEJAK_AUDIT_TOKEN or --token-file.
func runWitness(ctx context.Context, out io.Writer, getenv func(string) string, o options) error {
	wit := o.wit
	if wit.BaseURL == "" || wit.Slug == "" || wit.StateDir == "" {
		return fmt.Errorf("usage: web audit witness --url BASE --slug SLUG --state DIR [--key VKEY] [--token-file FILE]")
	}
	wit.Token = getenv("JEJAK_AUDIT_TOKEN")
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		wit.Token = string(b)
	}
	wit.Token = strings.TrimSpace(wit.Token)
	if wit.Token == "" {
		return fmt.Errorf("the witness needs a read-only audit token: set JEJAK_AUDIT_TOKEN or --token-file (an owner creates one on the trail page)")
	}
	return app.AuditWitness(ctx, out, wit)
}

// dispatch runs the commands that open the database.
func dispatch(ctx context.Context, cmd string, cfg app.Config, out io.Writer, o options) error {
	log := newLogger(cfg.LogLevel)
	switch cmd {
	case "migrate":
		return app.Migrate(ctx, cfg, log)
	case "seed":
		if o.scale.AuditEvents < 0 || o.scale.Jobs < 0 || o.scale.Tenants < 0 {
			return fmt.Errorf("-audit-events, -jobs and -tenants must be ≥ 0")
		}
		return app.Seed(ctx, cfg, log, out, o.scale)
	case "audit verify":
		return app.AuditVerify(ctx, cfg, log, out, o.tenantSlug, o.anchorDir)
	case "audit anchor":
		return app.AuditAnchor(ctx, cfg, log, out)
	case "outbox status":
		return app.OutboxStatus(ctx, cfg, log, out)
	case "outbox retry-failed":
		if strings.TrimSpace(o.reason) == "" {
			return fmt.Errorf("--reason is required: it is recorded in each affected tenant's audit trail")
		}
		return app.OutboxRetryFailed(ctx, cfg, log, out, o.tenantSlug, o.reason)
	default:
		return app.Serve(ctx, cfg, log, out)
	}
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	// JSON lines; records logged with a context also carry its trace_id,
	// tenant_id, job_id and worker_id.
	return slog.New(tracing.NewLogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l})))
}
