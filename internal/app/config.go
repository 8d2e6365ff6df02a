// Package app wires Jejak's parts together for the web binary: it reads
// configuration, starts the embedded database when no DATABASE_URL is set,
// migrates, opens the pools, and runs the HTTP server beside the workers.
package app

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jejakhq/jejak/internal/webhook"
)

// Config is Jejak's configuration, from the environment (flags may
// override fields).
type Config struct {
	DatabaseURL   string // DATABASE_URL; "" = embedded cluster under DataDir
	DataDir       string // JEJAK_DATA_DIR; default .data
	Addr          string // JEJAK_ADDR; default 127.0.0.1:8080
	Workers       int    // JEJAK_WORKERS; 0 = web only
	DBConns       int    // JEJAK_DB_CONNS; connections of each of the two pools (tenant, system), default DefaultDBConns
	WorkersOnly   bool   // JEJAK_WORKERS_ONLY; no HTTP server
	Demo          bool   // JEJAK_DEMO; seed demo data and run the activity generator
	NATSURL       string // NATS_URL; optional
	SMTPURL       string // JEJAK_SMTP_URL (smtp://host:port); "" = the dev mail sink in the database
	SecureCookies bool   // JEJAK_SECURE_COOKIES; set behind TLS
	LogLevel      string // JEJAK_LOG_LEVEL: debug, info, warn, error

	Lease     time.Duration // JEJAK_LEASE; job claim lease, 0 = the engine's default (15s)
	Heartbeat time.Duration // JEJAK_HEARTBEAT; lease renewal interval, 0 = min(5s, lease/3)

	AnchorDir string // JEJAK_ANCHOR_DIR; signed audit checkpoints, default <data dir>/anchors
	// WebhookKeyFile (JEJAK_WEBHOOK_KEY_FILE) holds the key sealing webhook
	// signing secrets; default <anchor dir>/webhook-secrets.key.
	WebhookKeyFile string

	ChaosKind bool // JEJAK_CHAOS_KIND; registers the chaos suite's test kind (never in production)

	AppDatabaseURL    string // JEJAK_APP_DATABASE_URL; tenant pool's own login (optional)
	SystemDatabaseURL string // JEJAK_SYSTEM_DATABASE_URL; cross-tenant pool's own login (optional)
	MetricsToken      string // JEJAK_METRICS_TOKEN: bearer token for /metrics; "" = loopback only
	OTelEndpoint      string // OTEL_EXPORTER_OTLP_ENDPOINT: export spans over OTLP/HTTP; "" = off
	PaymentURL        string // JEJAK_PAYMENT_URL; "" = the built-in payment simulator on loopback
	// WebhookAllow opens address ranges to webhooks despite the SSRF guard
	// (JEJAK_WEBHOOK_ALLOW_CIDRS, comma-separated), for development.
	WebhookAllow []netip.Prefix
	// WebhookAllowAddrs opens single address and port pairs to webhooks
	// (the demo's receiver).
	WebhookAllowAddrs []netip.AddrPort
	// WebhookMaxEndpoints is how many webhook endpoints a tenant may have
	// (JEJAK_WEBHOOK_MAX_ENDPOINTS; default webhook.DefaultMaxEndpoints).
	WebhookMaxEndpoints int
	// WebhookWorkers are the delivery workers beside Workers
	// (JEJAK_WEBHOOK_WORKERS); WebhookTenantConcurrency caps one tenant's
	// deliveries in flight, claimed across replicas and run in each
	// (JEJAK_WEBHOOK_TENANT_CONCURRENCY).
	WebhookWorkers, WebhookTenantConcurrency int
	// WebhookBreaker is the per-endpoint circuit breaker: failures in a
	// row that open it (JEJAK_WEBHOOK_BREAKER_FAILURES) and how long an
	// endpoint fails before it is disabled (JEJAK_WEBHOOK_DISABLE_AFTER).
	WebhookBreaker webhook.Breaker
	// AlertWebhookURL (JEJAK_ALERT_WEBHOOK_URL) receives alert transitions
	// as signed webhooks; "" = none (the staff endpoint is disabled).
	AlertWebhookURL string
	// AlertWebhookSecret (JEJAK_ALERT_WEBHOOK_SECRET, "whsec_…") signs
	// them; "" = generated once, kept, and shown to staff on /admin/alerts.
	AlertWebhookSecret string
	// TrustedProxies (JEJAK_TRUSTED_PROXIES, comma-separated CIDRs or
	// addresses) are the reverse proxies whose X-Forwarded-For is believed.
	TrustedProxies []*net.IPNet
	// PprofAddr (JEJAK_PPROF_ADDR, host:port) serves net/http/pprof on its
	// own listener; "" = off. Loopback only unless PprofAllowRemote
	// (JEJAK_PPROF_ALLOW_REMOTE).
	PprofAddr        string
	PprofAllowRemote bool
}

// DefaultDBConns is each pool's size unless JEJAK_DB_CONNS says
// otherwise. Past a few connections per database core, more sessions add
// no throughput but each statement costs PostgreSQL more CPU (more
// backends sharing the cores' caches, more of them waking and sleeping):
// on two cores, pools of 8 against 20 served 10-50 % more pages and
// project creations a second and ran 20-25 % more jobs a second, with a
// lower p99 (docs/benchmarks.md, 2026-12-06 06:19).
const DefaultDBConns = 8

// FromEnv reads Config from getenv.
func FromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		DatabaseURL:  getenv("DATABASE_URL"),
		DataDir:      or(getenv("JEJAK_DATA_DIR"), ".data"),
		Addr:         or(getenv("JEJAK_ADDR"), "127.0.0.1:8080"),
		Workers:      4,
		DBConns:      DefaultDBConns,
		NATSURL:      getenv("NATS_URL"),
		SMTPURL:      getenv("JEJAK_SMTP_URL"),
		LogLevel:     or(getenv("JEJAK_LOG_LEVEL"), "info"),
		PaymentURL:   getenv("JEJAK_PAYMENT_URL"),
		MetricsToken: getenv("JEJAK_METRICS_TOKEN"),
		OTelEndpoint: getenv("OTEL_EXPORTER_OTLP_ENDPOINT"),
	}
	var err error
	if v := getenv("JEJAK_WORKERS"); v != "" {
		if c.Workers, err = strconv.Atoi(v); err != nil || c.Workers < 0 {
			return c, fmt.Errorf("JEJAK_WORKERS must be a whole number ≥ 0, got %q", v)
		}
	}
	if err := c.webhookLimits(getenv); err != nil {
		return c, err
	}
	if v := getenv("JEJAK_DB_CONNS"); v != "" {
		// Below 4 the system pool cannot hold the claim loop, the
		// completer, the leader's lock and a handler's transaction at once.
		if c.DBConns, err = strconv.Atoi(v); err != nil || c.DBConns < 4 || c.DBConns > 1000 {
			return c, fmt.Errorf("JEJAK_DB_CONNS must be a whole number from 4 to 1000, got %q", v)
		}
	}
	for name, dst := range map[string]*bool{"JEJAK_WORKERS_ONLY": &c.WorkersOnly, "JEJAK_DEMO": &c.Demo, "JEJAK_SECURE_COOKIES": &c.SecureCookies,
		"JEJAK_CHAOS_KIND": &c.ChaosKind, "JEJAK_PPROF_ALLOW_REMOTE": &c.PprofAllowRemote} {
		if v := getenv(name); v != "" {
			if *dst, err = strconv.ParseBool(v); err != nil {
				return c, fmt.Errorf("%s must be true or false, got %q", name, v)
			}
		}
	}
	c.AnchorDir = getenv("JEJAK_ANCHOR_DIR")
	c.WebhookKeyFile = getenv("JEJAK_WEBHOOK_KEY_FILE")
	for name, dst := range map[string]*time.Duration{"JEJAK_LEASE": &c.Lease, "JEJAK_HEARTBEAT": &c.Heartbeat} {
		if v := getenv(name); v != "" {
			if *dst, err = time.ParseDuration(v); err != nil || *dst <= 0 {
				return c, fmt.Errorf("%s must be a positive duration such as 15s, got %q", name, v)
			}
		}
	}
	if c.Lease > 0 && c.Heartbeat > 0 && c.Heartbeat >= c.Lease {
		return c, fmt.Errorf("JEJAK_HEARTBEAT (%s) must be shorter than JEJAK_LEASE (%s)", c.Heartbeat, c.Lease)
	}
	c.AppDatabaseURL = getenv("JEJAK_APP_DATABASE_URL")
	c.SystemDatabaseURL = getenv("JEJAK_SYSTEM_DATABASE_URL")
	if err := c.webhookAddrs(getenv); err != nil {
		return c, err
	}
	if c.TrustedProxies, err = parseCIDRs(getenv("JEJAK_TRUSTED_PROXIES")); err != nil {
		return c, fmt.Errorf("JEJAK_TRUSTED_PROXIES: %w", err)
	}
	if c.PprofAddr = strings.TrimSpace(getenv("JEJAK_PPROF_ADDR")); c.PprofAddr != "" {
		if err := checkPprofAddr(c.PprofAddr, c.PprofAllowRemote); err != nil {
			return c, err
		}
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		return c, fmt.Errorf("JEJAK_LOG_LEVEL must be debug, info, warn or error, got %q", c.LogLevel)
	}
	return c, nil
}

// parseCIDRs reads "10.0.0.0/8, 192.0.2.7, ::1": a bare address is a
// range of one.
func parseCIDRs(v string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			ip := net.ParseIP(f)
			if ip == nil {
				return nil, fmt.Errorf("%q is not an address or CIDR range", f)
			}
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address or CIDR range", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// WebhookKeyPath is JEJAK_WEBHOOK_KEY_FILE, or webhook-secrets.key beside
// the anchor key.
func (c Config) WebhookKeyPath() string {
	if c.WebhookKeyFile != "" {
		return c.WebhookKeyFile
	}
	return filepath.Join(c.AnchorDirectory(), "webhook-secrets.key")
}

// AnchorDirectory is JEJAK_ANCHOR_DIR, or anchors/ under the data directory.
func (c Config) AnchorDirectory() string {
	if c.AnchorDir != "" {
		return c.AnchorDir
	}
	return filepath.Join(c.DataDir, "anchors")
}

// webhookLimits reads the webhook endpoint and delivery limits.
func (c *Config) webhookLimits(getenv func(string) string) error {
	c.WebhookMaxEndpoints, c.WebhookWorkers, c.WebhookTenantConcurrency = webhook.DefaultMaxEndpoints, 64, 16
	for _, n := range []struct {
		name string
		dst  *int
		max  int
	}{{"JEJAK_WEBHOOK_MAX_ENDPOINTS", &c.WebhookMaxEndpoints, 10000}, {"JEJAK_WEBHOOK_WORKERS", &c.WebhookWorkers, 1000},
		{"JEJAK_WEBHOOK_TENANT_CONCURRENCY", &c.WebhookTenantConcurrency, 1000},
		{"JEJAK_WEBHOOK_BREAKER_FAILURES", &c.WebhookBreaker.Failures, 1000}} {
		if v := getenv(n.name); v != "" {
			var err error
			if *n.dst, err = strconv.Atoi(v); err != nil || *n.dst < 1 || *n.dst > n.max {
				return fmt.Errorf("%s must be a whole number from 1 to %d, got %q", n.name, n.max, v)
			}
		}
	}
	if v := getenv("JEJAK_WEBHOOK_DISABLE_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Hour || d > 90*24*time.Hour {
			return fmt.Errorf("JEJAK_WEBHOOK_DISABLE_AFTER must be a duration from 1h to 2160h (90 days), got %q", v)
		}
		c.WebhookBreaker.DisableAfter = d
	}
	return nil
}

// webhookAddrs reads where webhooks may go: the ranges opened despite the
// SSRF guard and the staff alert endpoint with its secret.
func (c *Config) webhookAddrs(getenv func(string) string) error {
	var err error
	if c.WebhookAllow, err = webhook.ParseAllowCIDRs(getenv("JEJAK_WEBHOOK_ALLOW_CIDRS")); err != nil {
		return fmt.Errorf("JEJAK_WEBHOOK_ALLOW_CIDRS: %w", err)
	}
	if c.AlertWebhookURL = strings.TrimSpace(getenv("JEJAK_ALERT_WEBHOOK_URL")); c.AlertWebhookURL != "" {
		if _, err := webhook.ParseURL(c.AlertWebhookURL); err != nil {
			return fmt.Errorf("JEJAK_ALERT_WEBHOOK_URL must be an absolute http:// or https:// URL without credentials, got %q", c.AlertWebhookURL)
		}
	}
	if v := getenv("JEJAK_ALERT_WEBHOOK_SECRET"); v != "" {
		if c.AlertWebhookSecret, err = webhook.ParseSecret(v); err != nil {
			return fmt.Errorf("JEJAK_ALERT_WEBHOOK_SECRET: %w", err)
		}
	}
	return nil
}
