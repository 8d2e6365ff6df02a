package app

import "testing"

func TestTrustedProxiesFromEnv(t *testing.T) {
	env := map[string]string{"JEJAK_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7 ,::1"}
	c, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if len(c.TrustedProxies) != 3 || c.TrustedProxies[0].String() != "10.0.0.0/8" ||
		c.TrustedProxies[1].String() != "192.0.2.7/32" || c.TrustedProxies[2].String() != "::1/128" {
		t.Fatalf("parsed %v", c.TrustedProxies)
	}
	env["JEJAK_TRUSTED_PROXIES"] = "10.0.0.0/33"
	if _, err := FromEnv(func(k string) string { return env[k] }); err == nil {
		t.Fatal("a bad range was accepted")
	}
	delete(env, "JEJAK_TRUSTED_PROXIES")
	if c, err := FromEnv(func(k string) string { return env[k] }); err != nil || len(c.TrustedProxies) != 0 {
		t.Fatalf("unset: %v %v", c.TrustedProxies, err)
	}
}

func TestDBConnsFromEnv(t *testing.T) {
	c, err := FromEnv(func(string) string { return "" })
	if err != nil || c.DBConns != 8 {
		t.Fatalf("default: %d, %v", c.DBConns, err)
	}
	c, err = FromEnv(func(k string) string { return map[string]string{"JEJAK_DB_CONNS": "20"}[k] })
	if err != nil || c.DBConns != 20 {
		t.Fatalf("20: %d, %v", c.DBConns, err)
	}
	for _, bad := range []string{"3", "0", "-1", "1001", "ten"} {
		if _, err := FromEnv(func(k string) string { return map[string]string{"JEJAK_DB_CONNS": bad}[k] }); err == nil {
			t.Errorf("JEJAK_DB_CONNS=%q accepted", bad)
		}
	}
}

// TestWebhookLimitsFromEnv: the webhook limits default to 50 endpoints, 4
// delivery workers and 2 deliveries per tenant, and refuse anything but a
// whole number in range.
func TestWebhookLimitsFromEnv(t *testing.T) {
	t.Parallel()
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	c, err := FromEnv(env(nil))
	if err != nil || c.WebhookMaxEndpoints != 50 || c.WebhookWorkers != 64 || c.WebhookTenantConcurrency != 16 {
		t.Fatalf("defaults: %d %d %d (%v)", c.WebhookMaxEndpoints, c.WebhookWorkers, c.WebhookTenantConcurrency, err)
	}
	c, err = FromEnv(env(map[string]string{"JEJAK_WEBHOOK_MAX_ENDPOINTS": "7", "JEJAK_WEBHOOK_WORKERS": "9", "JEJAK_WEBHOOK_TENANT_CONCURRENCY": "3"}))
	if err != nil || c.WebhookMaxEndpoints != 7 || c.WebhookWorkers != 9 || c.WebhookTenantConcurrency != 3 {
		t.Fatalf("set: %d %d %d (%v)", c.WebhookMaxEndpoints, c.WebhookWorkers, c.WebhookTenantConcurrency, err)
	}
	for _, kv := range []map[string]string{{"JEJAK_WEBHOOK_MAX_ENDPOINTS": "0"}, {"JEJAK_WEBHOOK_WORKERS": "-1"},
		{"JEJAK_WEBHOOK_TENANT_CONCURRENCY": "two"}, {"JEJAK_WEBHOOK_MAX_ENDPOINTS": "10001"}} {
		if _, err := FromEnv(env(kv)); err == nil {
			t.Errorf("%v accepted", kv)
		}
	}
}
