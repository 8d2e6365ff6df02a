package demo

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jejakhq/jejak/internal/webhook"
)

// HookReceiver is the demo's webhook receiver: a small HTTP server on a
// loopback port, inside the binary, that verifies each delivery's Standard
// Webhooks signature with the endpoint's current (or previous) secret and
// shows what it received at its root page. /hooks/<slug> answers 200;
// /hooks/<slug>/flaky answers 503 with Retry-After, so its deliveries
// retry on the schedule and finally fail.
type HookReceiver struct {
	system *pgxpool.Pool
	// secrets opens the endpoints' sealed signing secrets.
	secrets *webhook.Sealer
	srv     *http.Server
	ln      net.Listener
	log     *slog.Logger

	mu  sync.Mutex
	got []receivedHook
}

type receivedHook struct {
	At       time.Time
	Path     string
	ID       string
	Verified bool
	Status   int
	Body     string
}

// StartHookReceiver listens on 127.0.0.1 (random port) and serves until
// Close.
func StartHookReceiver(system *pgxpool.Pool, secrets *webhook.Sealer, log *slog.Logger) (*HookReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo webhook receiver: %w", err)
	}
	h := &HookReceiver{system: system, secrets: secrets, ln: ln, log: log}
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

// URL is the receiver's base URL.
func (h *HookReceiver) URL() string { return "http://" + h.ln.Addr().String() }

// AddrPort is the receiver's listening address and port, for the
// webhook guard to open exactly.
func (h *HookReceiver) AddrPort() netip.AddrPort {
	ap := h.ln.Addr().(*net.TCPAddr).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// Close stops the receiver.
func (h *HookReceiver) Close() { _ = h.srv.Close() }

// SeedEndpoints gives every demo tenant one endpoint that succeeds and one
// that fails, pointing at this receiver. Earlier runs' endpoints (another
// port) are moved to this one, so re-running adds nothing.
func (h *HookReceiver) SeedEndpoints(ctx context.Context) error {
	base := h.URL()
	if _, err := h.system.Exec(ctx, `UPDATE webhook_endpoints
		SET url = regexp_replace(url, '^http://127\.0\.0\.1:[0-9]+/', $1 || '/')
		WHERE url ~ '^http://127\.0\.0\.1:[0-9]+/hooks/'`, base); err != nil {
		return fmt.Errorf("move demo webhook endpoints: %w", err)
	}
	for _, t := range Tenants {
		for _, path := range []string{"/hooks/" + t.Slug, "/hooks/" + t.Slug + "/flaky"} {
			secret, err := webhook.NewSecret()
			if err != nil {
				return err
			}
			if _, err := h.system.Exec(ctx, `INSERT INTO webhook_endpoints (tenant_id, url, events, secret, created_at, updated_at)
				SELECT t.id, $2, '{*}', $3, now(), now() FROM tenants t
				 WHERE t.slug = $1 AND NOT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = t.id AND e.url = $2)`,
				t.Slug, base+path, secret); err != nil {
				return fmt.Errorf("demo webhook endpoint: %w", err)
			}
		}
	}
	return nil
}

// ServeHTTP receives deliveries (POST) and shows them (GET /).
func (h *HookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/" {
		h.page(w)
		return
	}
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/hooks/") {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	verified := h.verify(r.Context(), r, body)
	status := http.StatusOK
	if !verified {
		status = http.StatusUnauthorized
	}
	if strings.HasSuffix(r.URL.Path, "/flaky") {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "30")
	}
	h.mu.Lock()
	h.got = append(h.got, receivedHook{At: time.Now().UTC(), Path: r.URL.Path, ID: r.Header.Get("webhook-id"),
		Verified: verified, Status: status, Body: string(body)})
	if len(h.got) > 100 {
		h.got = h.got[len(h.got)-100:]
	}
	h.mu.Unlock()
	w.WriteHeader(status)
	if verified {
		fmt.Fprintln(w, "signature verified")
	} else {
		fmt.Fprintln(w, "signature NOT verified")
	}
}

// verify checks the signature with the endpoint's secrets as stored now,
// so a rotation in the dashboard is picked up at once, and refuses
// timestamps more than 5 minutes away.
func (h *HookReceiver) verify(ctx context.Context, r *http.Request, body []byte) bool {
	ts, err := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
	if err != nil || time.Since(time.Unix(ts, 0)).Abs() > 5*time.Minute {
		return false
	}
	rows, err := h.system.Query(ctx, `SELECT tenant_id, secret, coalesce(previous_secret, '') FROM webhook_endpoints WHERE url = $1`, h.URL()+r.URL.Path)
	if err != nil {
		return false
	}
	defer rows.Close()
	for rows.Next() {
		var tenantID int64
		var cur, prev string
		if rows.Scan(&tenantID, &cur, &prev) != nil {
			return false
		}
		for _, s := range []string{cur, prev} {
			if s, err = h.secrets.Open(tenantID, s); err != nil {
				return false
			}
			if s != "" && webhook.Verify(s, r.Header.Get("webhook-id"), ts, body, r.Header.Get("webhook-signature")) {
				return true
			}
		}
	}
	return false
}

var hookPage = template.Must(template.New("hooks").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Jejak demo webhook receiver</title></head>
<body><h1>Demo webhook receiver</h1>
<p>Deliveries this receiver got (newest first), with their Standard Webhooks signature checked against the endpoint's secret.</p>
<table border="1" cellpadding="4"><tr><th>received (UTC)</th><th>path</th><th>webhook-id</th><th>signature</th><th>answered</th><th>body</th></tr>
{{range .}}<tr><td>{{.At.Format "15:04:05"}}</td><td>{{.Path}}</td><td>{{.ID}}</td><td>{{if .Verified}}verified{{else}}NOT verified{{end}}</td><td>{{.Status}}</td><td><code>{{.Body}}</code></td></tr>
{{else}}<tr><td colspan="6">Nothing yet: create a project as a tenant owner.</td></tr>{{end}}
</table></body></html>`))

func (h *HookReceiver) page(w http.ResponseWriter) {
	h.mu.Lock()
	got := make([]receivedHook, len(h.got))
	for i := range h.got {
		got[len(h.got)-1-i] = h.got[i]
	}
	h.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = hookPage.Execute(w, got)
}
