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
	if err != nil || c.DBConns != 20 {
		t.Fatalf("default: %d, %v", c.DBConns, err)
	}
	c, err = FromEnv(func(k string) string { return map[string]string{"JEJAK_DB_CONNS": "8"}[k] })
	if err != nil || c.DBConns != 8 {
		t.Fatalf("8: %d, %v", c.DBConns, err)
	}
	for _, bad := range []string{"3", "0", "-1", "1001", "ten"} {
		if _, err := FromEnv(func(k string) string { return map[string]string{"JEJAK_DB_CONNS": bad}[k] }); err == nil {
			t.Errorf("JEJAK_DB_CONNS=%q accepted", bad)
		}
	}
}
