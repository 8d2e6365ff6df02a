package web_test

import (
	"context"
	"net/url"
)

// webhookWithDelivery registers an endpoint of slug through the owner's
// form and gives it one delivery; it returns both ids.
func (f *fixture) webhookWithDelivery(slug string) (endpoint, delivery int64) {
	f.t.Helper()
	owner := f.client()
	owner.login(map[string]string{"toko-bunga-melati": "budi@melati.test", "kopi-senja": "sari@senja.test"}[slug])
	a := owner.post("/t/"+slug+"/webhooks", owner.withCSRF(url.Values{"url": {"https://hooks.example.com/" + slug}, "events": {"*"}}), false)
	if a.status != 200 {
		f.t.Fatalf("create webhook: %d", a.status)
	}
	ctx := context.Background()
	if err := f.db.Admin.QueryRow(ctx, `SELECT e.id FROM webhook_endpoints e JOIN tenants t ON t.id = e.tenant_id
		WHERE t.slug = $1 ORDER BY e.id DESC LIMIT 1`, slug).Scan(&endpoint); err != nil {
		f.t.Fatalf("endpoint id: %v", err)
	}
	if err := f.db.Admin.QueryRow(ctx, `INSERT INTO webhook_deliveries (tenant_id, endpoint_id, event_id, event_type, body, created_at, updated_at)
		SELECT tenant_id, id, 1000 + id, 'project.created', '{}', now(), now() FROM webhook_endpoints WHERE id = $1 RETURNING id`, endpoint).Scan(&delivery); err != nil {
		f.t.Fatalf("delivery: %v", err)
	}
	return endpoint, delivery
}
