package webhook

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/jejakhq/jejak/internal/clock"
	"github.com/jejakhq/jejak/internal/database"
)

// The system tenant (db/schema/00060) owns Jejak's own notifications to
// staff. It has one endpoint, whose URL and secret come from the
// environment rather than from an owner's form, so that staff alerts ride
// the same outbox → JetStream → fan-out → webhook.deliver path as tenant
// events (signing, retries, SSRF guard, spans) without a second one.

// SystemEndpoint is the staff endpoint as configured at start.
type SystemEndpoint struct {
	TenantID int64 // the system tenant
	Endpoint Endpoint
	// Configured: a URL was given and the endpoint is enabled. When false
	// the endpoint (if any) was disabled and nothing should be published.
	Configured bool
}

// SystemConfig is the staff endpoint's configuration.
type SystemConfig struct {
	URL string // "" = no staff webhook: the endpoint, if any, is disabled
	// Secret is the signing secret ("whsec_" + base64 of 24 to 64 bytes);
	// "" keeps the stored one, or generates one the first time.
	Secret string
	Events []string // event types the endpoint receives
	// Sealer seals the secret at rest (nil: stored readable).
	Sealer *Sealer
}

// ParseSecret checks a signing secret given by configuration: "whsec_"
// followed by the standard base64 of 24 to 64 bytes.
func ParseSecret(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, SecretPrefix) {
		return "", fmt.Errorf("a webhook secret starts with %q", SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, SecretPrefix))
	if err != nil || len(key) < 24 || len(key) > 64 {
		return "", fmt.Errorf("a webhook secret is %q followed by the base64 of 24 to 64 random bytes", SecretPrefix)
	}
	return s, nil
}

// SyncSystemEndpoint makes the system tenant's endpoint match cfg, through
// the cross-tenant pool: created or updated (and enabled) when cfg.URL is
// set, disabled when it is not. Replicas starting at once take turns.
func SyncSystemEndpoint(ctx context.Context, system database.Pool, clk clock.Clock, cfg SystemConfig) (SystemEndpoint, error) {
	if clk == nil {
		clk = clock.Database{}
	}
	var out SystemEndpoint
	var u string
	if cfg.URL != "" {
		var err error
		if u, err = ParseURL(cfg.URL); err != nil {
			return out, fmt.Errorf("staff webhook URL: %w", err)
		}
		if cfg.Secret != "" {
			if cfg.Secret, err = ParseSecret(cfg.Secret); err != nil {
				return out, fmt.Errorf("staff webhook secret: %w", err)
			}
		}
		if len(cfg.Events) == 0 {
			return out, errors.New("staff webhook: no event types")
		}
	}
	err := database.InTx(ctx, system, func(tx pgx.Tx) error {
		st := newStore(tx)
		if err := st.lockSystem(ctx); err != nil {
			return err
		}
		tid, err := st.systemTenant(ctx)
		if err != nil {
			return fmt.Errorf("find the system tenant: %w", err)
		}
		out.TenantID = tid
		cur, err := st.systemEndpoint(ctx, tid, cfg.Sealer)
		switch {
		case errors.Is(err, ErrNotFound):
			if u == "" {
				return nil // nothing configured, nothing to disable
			}
			secret := cfg.Secret
			if secret == "" {
				if secret, err = NewSecret(); err != nil {
					return err
				}
			}
			if secret, err = cfg.Sealer.seal(tid, secret); err != nil {
				return err
			}
			out.Endpoint, err = st.insertEndpoint(ctx, tid, clk.Now(), u, cfg.Events, secret, false)
			out.Configured = err == nil
			return err
		case err != nil:
			return err
		}
		if u == "" {
			if !cur.Enabled {
				out.Endpoint = cur.Endpoint
				return nil
			}
			sealed, err := cfg.Sealer.seal(tid, cur.secret)
			if err != nil {
				return err
			}
			out.Endpoint, err = st.setSystemEndpoint(ctx, tid, cur, cur.URL, cur.Events, sealed, false,
				"JEJAK_ALERT_WEBHOOK_URL is not set", clk.Now())
			return err
		}
		secret := cur.secret
		if cfg.Secret != "" {
			secret = cfg.Secret
		}
		if secret, err = cfg.Sealer.seal(tid, secret); err != nil {
			return err
		}
		out.Endpoint, err = st.setSystemEndpoint(ctx, tid, cur, u, cfg.Events, secret, true, "", clk.Now())
		out.Configured = err == nil
		return err
	})
	if err != nil {
		return SystemEndpoint{}, fmt.Errorf("sync the staff webhook endpoint: %w", err)
	}
	return out, nil
}

// SystemStatus is the staff endpoint and its latest delivery, for the
// alerts page.
type SystemStatus struct {
	Endpoint Endpoint
	// Secret is the signing secret, for staff to configure their receiver.
	Secret string
	// Last is the latest delivery; nil when nothing was sent yet.
	Last *Delivery
}

// SystemEndpointStatus reads the staff endpoint's state through q (a
// system-pool transaction), its secret opened with sealer; ok is false
// when none was ever configured.
func SystemEndpointStatus(ctx context.Context, q database.Querier, sealer *Sealer) (SystemStatus, bool, error) {
	st := newStore(q)
	tid, err := st.systemTenant(ctx)
	if err != nil {
		return SystemStatus{}, false, fmt.Errorf("find the system tenant: %w", err)
	}
	cur, err := st.systemEndpoint(ctx, tid, sealer)
	if errors.Is(err, ErrNotFound) {
		return SystemStatus{}, false, nil
	}
	if err != nil {
		return SystemStatus{}, false, err
	}
	s := SystemStatus{Endpoint: cur.Endpoint, Secret: cur.secret}
	if s.Last, err = st.systemLastDelivery(ctx, tid, cur.ID); err != nil {
		return SystemStatus{}, false, err
	}
	return s, true, nil
}
