// Package payment charges tenants for paid plans through a payment
// provider's HTTP API and reconciles what the provider charged with
// Jejak's invoices. Upgrading to a paid plan creates an
// invoice and enqueues payment.charge with the invoice as idempotency key;
// payment.reconcile finds invoices charged more than once (the classic
// double charge: the provider charged, the response timed out, the retry
// charged again), refunds the extras through the provider and records
// detection and refund in the tenant's trail. With no JEJAK_PAYMENT_URL a
// built-in simulator (sim.go) plays the provider over real HTTP.
package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Charge is a provider charge.
type Charge struct {
	ID        string    `json:"id"`
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	Tenant    string    `json:"tenant"`
	Invoice   string    `json:"invoice"`
	Refunded  int64     `json:"refunded"`
	CreatedAt time.Time `json:"created_at"`
}

// Refund is a provider refund.
type Refund struct {
	ID     string `json:"id"`
	Charge string `json:"charge"`
	Amount int64  `json:"amount"`
}

// ChargeRequest asks the provider to charge an invoice.
type ChargeRequest struct {
	IdempotencyKey string
	Amount         int64
	Currency       string
	Tenant         string
	Invoice        string
}

// Provider is a payment provider's API.
type Provider interface {
	Charge(ctx context.Context, r ChargeRequest) (Charge, error)
	// Charges lists a tenant's charges, oldest first.
	Charges(ctx context.Context, tenant string) ([]Charge, error)
	Refund(ctx context.Context, idempotencyKey, chargeID string, amount int64, reason string) (Refund, error)
}

// ErrDeclined: the provider refused the charge; retrying will not help.
var ErrDeclined = errors.New("payment declined by the provider")

// HTTPProvider talks to a provider at BaseURL (the simulator's API, shaped
// like common card providers': JSON, Idempotency-Key header).
type HTTPProvider struct {
	BaseURL string
	Client  *http.Client // nil = 10 s timeout
}

func (p *HTTPProvider) client() *http.Client {
	if p.Client != nil {
		return p.Client
	}
	return &http.Client{Timeout: 10 * time.Second}
}

func (p *HTTPProvider) do(ctx context.Context, method, path, key string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(p.BaseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := p.client().Do(req)
	if err != nil {
		return fmt.Errorf("payment provider %s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("payment provider %s %s: read answer: %w", method, path, err)
	}
	switch {
	case res.StatusCode == http.StatusPaymentRequired:
		return fmt.Errorf("%w: %s", ErrDeclined, bytes.TrimSpace(raw))
	case res.StatusCode >= 400:
		return fmt.Errorf("payment provider %s %s: %d %s", method, path, res.StatusCode, bytes.TrimSpace(raw))
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("payment provider %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// Charge creates a charge.
func (p *HTTPProvider) Charge(ctx context.Context, r ChargeRequest) (Charge, error) {
	var c Charge
	err := p.do(ctx, http.MethodPost, "/v1/charges", r.IdempotencyKey, map[string]any{
		"amount": r.Amount, "currency": r.Currency, "metadata": map[string]string{"tenant": r.Tenant, "invoice": r.Invoice},
	}, &c)
	return c, err
}

// Charges lists a tenant's charges.
func (p *HTTPProvider) Charges(ctx context.Context, tenant string) ([]Charge, error) {
	var out struct {
		Data []Charge `json:"data"`
	}
	err := p.do(ctx, http.MethodGet, "/v1/charges?tenant="+url.QueryEscape(tenant), "", nil, &out)
	return out.Data, err
}

// Refund refunds amount of a charge.
func (p *HTTPProvider) Refund(ctx context.Context, key, chargeID string, amount int64, reason string) (Refund, error) {
	var r Refund
	err := p.do(ctx, http.MethodPost, "/v1/refunds", key, map[string]any{"charge": chargeID, "amount": amount, "reason": reason}, &r)
	return r, err
}
